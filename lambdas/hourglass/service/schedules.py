"""Schedule use cases: put, read, list, delete, pause, resume.

Each occurrence is an ordinary message whose id is `Schedule.occurrence_id(at)`: storing it is a
conditional put, so materializing twice stores one message. Occurrence N+1 is stored when the sweep claims N
for its hand-off, else once N has had its first outcome or ended in any way (`transitions.chain`, repaired by
the sweep); every change of a schedule bumps its version, so an occurrence of an older version is cancelled
instead of delivered.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core import admission, epoch, validation
from hourglass.core.model import Queue, Status, carried
from hourglass.core.recurrence import Schedule
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError, ValidationError
from hourglass.service import targets, transitions
from hourglass.service.context import Context
from hourglass.service.messages import Messages
from hourglass.service.transitions import is_current, materialize


class StorageUsed(storage.Messages, storage.Schedules, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


__all__ = ["Schedules", "is_current", "materialize"]

WRITE_ATTEMPTS = 3


def of_queue(schedule: Schedule, queue: Queue) -> bool:
    """Whether the schedule belongs to this life of its queue (one stored before epochs were is taken to)."""
    return schedule.queue_epoch is None or epoch.belongs(queue, schedule.queue_epoch)


class Schedules:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store: StorageUsed = ctx.store
        self.messages = Messages(ctx)

    def put(self, queue_name: str, name: str, doc: Any) -> tuple[Schedule, bool]:
        validation.queue_name(queue_name)
        validation.schedule_name(name)
        queue = self.messages.queues.get(queue_name)
        now = self.ctx.clock()
        request = validation.schedule_request(doc, now)
        targets.check_allowed(self.ctx, request.target, "target")
        for _ in range(WRITE_ATTEMPTS):
            stored = self.store.get_schedule(queue_name, name)
            # One of an earlier queue of this name (left by a DELETE that died half-way) is replaced as if absent.
            existing = stored if stored is not None and of_queue(stored, queue) else None
            schedule = Schedule(
                queue=queue_name,
                name=name,
                recurrence=request.recurrence,
                body=request.body,
                created_at=existing.created_at if existing else now,
                paused=existing.paused if existing else False,
                version=existing.version + 1 if existing else 1,
                queue_epoch=queue.created_at,
                paused_at=existing.paused_at if existing else None,
                written_at=now,
                **carried(request),
            )
            admission.admit_schedule(schedule, queue, now)
            try:
                self.store.put_schedule(schedule, expected_version=stored.version if stored else None)
            except StaleVersionError:
                continue
            if existing is not None:
                self._cancel_pending(existing, now)
            materialize(self.ctx, schedule, queue, now, now)
            return schedule, existing is None
        raise ConflictError(f"schedule {name} keeps changing; try again")

    def get(self, queue_name: str, name: str) -> Schedule:
        validation.queue_name(queue_name)
        validation.schedule_name(name)
        queue = self.messages.queues.get(queue_name)
        schedule = self.store.get_schedule(queue_name, name)
        if schedule is None or not of_queue(schedule, queue):
            raise NotFoundError(f"schedule {name} does not exist in queue {queue_name}")
        return schedule

    def list(self, queue_name: str, params: dict[str, str] | None) -> tuple[list[Schedule], str | None]:
        unknown = sorted(set(params or {}) - {"limit", "cursor"})
        if unknown:
            raise ValidationError(unknown[0], "is not a known parameter")
        query = validation.list_query(params)
        queue = self.messages.queues.get(queue_name)
        found, cursor = self.store.list_schedules(queue_name, limit=query.limit, cursor=query.cursor)
        return [schedule for schedule in found if of_queue(schedule, queue)], cursor

    def delete(self, queue_name: str, name: str) -> None:
        for _ in range(WRITE_ATTEMPTS):
            schedule = self.get(queue_name, name)
            try:
                self.store.delete_schedule(schedule)
            except StaleVersionError:
                continue
            self._cancel_pending(schedule, self.ctx.clock())
            return
        raise ConflictError(f"schedule {name} keeps changing; try again")

    def pause(self, queue_name: str, name: str) -> Schedule:
        return self._set_paused(queue_name, name, paused=True)

    def resume(self, queue_name: str, name: str) -> Schedule:
        return self._set_paused(queue_name, name, paused=False)

    def _set_paused(self, queue_name: str, name: str, *, paused: bool) -> Schedule:
        for _ in range(WRITE_ATTEMPTS):
            old = self.get(queue_name, name)
            if old.paused == paused:
                return old
            # A new version: occurrences planned before the change are never delivered.
            now = self.ctx.clock()
            paused_at = now if paused else old.paused_at
            schedule = replace(old, paused=paused, version=old.version + 1, paused_at=paused_at, written_at=now)
            try:
                self.store.put_schedule(schedule, expected_version=old.version)
            except StaleVersionError:
                continue
            if paused:
                self._cancel_pending(old, now)
            else:
                # Occurrences that fell while paused are caught up as its policy says (`catch_up`).
                queue = self.messages.queues.get(queue_name)
                materialize(self.ctx, schedule, queue, min(paused_at or now, now), now)
            return schedule
        raise ConflictError(f"schedule {name} keeps changing; try again")

    def _cancel_pending(self, old: Schedule, now: datetime) -> None:
        """Cancel the occurrences `old` planned next (conditionally): the next one, and the one after it, stored
        when the sweep claimed the next; the dispatcher cancels any other stale one."""
        if old.paused:
            return
        for at in old.next_due(now, count=2):
            message = self.store.get_message(old.queue, old.occurrence_id(at))
            if message is None or message.status is not Status.PENDING:
                continue
            with contextlib.suppress(StaleVersionError):
                transitions.cancel(self.ctx, message, now)
