"""Schedule use cases: put, read, list, delete, pause, resume, and materializing occurrences as messages.

Each occurrence is an ordinary message whose id is `Schedule.occurrence_id(at)`: storing it is a
conditional put, so materializing twice stores one message. Occurrence N+1 is stored when N starts
its delivery (before N reaches its target); every change of a schedule bumps its version, so an
occurrence of an older version is cancelled instead of delivered.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.core import admission, delivery_control, lifecycle, validation
from hourglass.core.model import Message, Queue, Status
from hourglass.core.recurrence import Schedule
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError, ValidationError
from hourglass.service import targets
from hourglass.service.context import Context
from hourglass.service.messages import Messages

WRITE_ATTEMPTS = 3


def is_current(schedule: Schedule | None, message: Message) -> bool:
    """Whether `message` is an occurrence of this very version of its (still existing, running) schedule."""
    if schedule is None or schedule.paused or message.occurrence_at is None:
        return False
    return schedule.occurrence_id(message.occurrence_at) == message.id


def materialize(ctx: Context, schedule: Schedule, queue: Queue, after: datetime, now: datetime) -> Message | None:
    """Store the first occurrence after `after` (once) and hand it off like any message.

    None when the schedule has ended or is paused, or the occurrence was stored already.
    """
    at = schedule.next_after(after)
    if at is None or schedule.paused:
        return None
    message = admission.occurrence(schedule, queue, at, now)
    # A rate-limited queue's occurrence takes its pacing slot here, as ingest does (one pacing write).
    placement = ctx.handoff.place(message, now, written_first=True, rate=delivery_control.of(queue).rate_limit)
    if placement.lease is not None:
        message = replace(message, claimed_until=placement.lease)
    if not ctx.store.put_occurrence(message, placement.keys):
        return None
    ctx.metrics.count("Scheduled", queue=queue.name)
    ctx.handoff.written(placement, message, now)
    return message


class Schedules:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.messages = Messages(ctx)

    def put(self, queue_name: str, name: str, doc: Any) -> tuple[Schedule, bool]:
        validation.queue_name(queue_name)
        validation.schedule_name(name)
        queue = self.messages.queues.get(queue_name)
        now = self.ctx.clock()
        request = validation.schedule_request(doc, now)
        targets.check_allowed(self.ctx, request.target, "target")
        for _ in range(WRITE_ATTEMPTS):
            existing = self.store.get_schedule(queue_name, name)
            schedule = Schedule(
                queue=queue_name,
                name=name,
                recurrence=request.recurrence,
                body=request.body,
                created_at=existing.created_at if existing else now,
                target=request.target,
                paused=existing.paused if existing else False,
                version=existing.version + 1 if existing else 1,
            )
            admission.admit_schedule(schedule, queue, now)
            try:
                self.store.put_schedule(schedule, expected_version=existing.version if existing else None)
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
        self.messages.queues.get(queue_name)
        schedule = self.store.get_schedule(queue_name, name)
        if schedule is None:
            raise NotFoundError(f"schedule {name} does not exist in queue {queue_name}")
        return schedule

    def list(self, queue_name: str, params: dict[str, str] | None) -> tuple[list[Schedule], str | None]:
        unknown = sorted(set(params or {}) - {"limit", "cursor"})
        if unknown:
            raise ValidationError(unknown[0], "is not a known parameter")
        query = validation.list_query(params)
        self.messages.queues.get(queue_name)
        return self.store.list_schedules(queue_name, limit=query.limit, cursor=query.cursor)

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
            schedule = replace(old, paused=paused, version=old.version + 1)
            try:
                self.store.put_schedule(schedule, expected_version=old.version)
            except StaleVersionError:
                continue
            now = self.ctx.clock()
            if paused:
                self._cancel_pending(old, now)
            else:
                materialize(self.ctx, schedule, self.messages.queues.get(queue_name), now, now)
            return schedule
        raise ConflictError(f"schedule {name} keeps changing; try again")

    def _cancel_pending(self, old: Schedule, now: datetime) -> None:
        """Cancel the occurrence `old` planned next (conditionally); the dispatcher cancels any other stale one."""
        if old.paused:
            return
        at = old.next_after(now)
        if at is None:
            return
        message = self.store.get_message(old.queue, old.occurrence_id(at))
        if message is None or message.status is not Status.PENDING:
            return
        retention = timedelta(days=self.ctx.settings.retention_days)
        with contextlib.suppress(StaleVersionError):
            self.store.cancel(lifecycle.cancel(message, now, retention))
            self.ctx.metrics.count("Cancelled", queue=message.queue)
