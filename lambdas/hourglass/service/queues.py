"""Queue use cases behind the REST API: create or replace, list, read, delete."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core import delivery_control, epoch, keys, validation
from hourglass.core.model import Queue, Status
from hourglass.core.timestamps import to_ms
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError, ValidationError
from hourglass.logs import log
from hourglass.service import ordering, pacing, targets, transitions
from hourglass.service.context import Context


class StorageUsed(
    storage.Queues, storage.QueueList, storage.QueueLives, storage.Messages, storage.PaceWindows, Protocol
):
    """The storage nouns this module uses (`adapters.storage`)."""


WRITE_ATTEMPTS = 3
# DELETE cancels pending messages for at most this long (API Gateway answers within 29 s).
DELETE_QUEUE_BUDGET = timedelta(seconds=15)


class Queues:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store: StorageUsed = ctx.store

    def put(self, name: str, doc: Any) -> tuple[Queue, bool]:
        """Create or replace, conditional on the version read: a pause or resume (or another PUT) between the
        read and the write makes it read again, so a write never undoes a change that was answered. The signing
        secrets the body leaves out are kept (`validation.signing_secrets`)."""
        validation.queue_name(name)
        for _ in range(WRITE_ATTEMPTS):
            existing = self.store.get_queue(name, consistent=True)
            # Every setting is the body's, but the secrets it leaves out are kept (never returned, they cannot
            # be sent back).
            settings = validation.queue_settings(doc, existing.settings if existing else None)
            targets.check_allowed(self.ctx, settings.target, "target")
            # PUT leaves the paused state as it is (only /pause and /resume change it).
            control = validation.delivery_control(doc or {})
            targets.check_allowed(self.ctx, control.failure_destination, "failure_destination")
            before = delivery_control.of(existing)
            # PUT keeps the pause, its reason and the breaker's window as they are.
            kept = replace(
                control, paused=before.paused, paused_reason=before.paused_reason, resumed_at=before.resumed_at
            )
            kept = replace(kept, pace_floor_us=pacing.floor_after(self.store, name, before, kept))
            if existing is None:
                # A new queue's slots are spread from its start (`keys.slot_pk`): no lease was taken elsewhere.
                queue = Queue(name, settings, self._new_epoch(name), kept, version=1, slot_layout=2)
            else:
                # Its messages and slots stay where they are (`partitions`, `slot_layout`: the queue's for life).
                queue = replace(existing, settings=settings, control=kept, version=existing.version + 1)
            self.store.register_queue(name)  # idempotent; before the queue item, so a listed name may lack one
            try:
                self.store.write_queue(queue, expected_version=existing.version if existing else None)
            except StaleVersionError:
                continue
            self.ctx.limits.forget(name)
            if before.ordering is not None and kept.ordering is None:
                ordering.unordered(self.ctx, name, self.ctx.clock())
            if delivery_control.of(existing).rate_limit is not None and kept.rate_limit is None:
                # Unpaced now (`#pace` and the windows): a later rate limit starts from now, not behind the
                # backlog paced before.
                self.store.reset_pace(name)
            return queue, existing is None
        raise ConflictError(f"queue {name} keeps changing; try again")

    def _new_epoch(self, name: str) -> datetime:
        """A new life of the name: what an earlier one left (a DELETE that died half-way) is removed first,
        and its epoch is later than anything of the earlier life."""
        self.store.clear_queue_items(name)
        return epoch.start(self.ctx.clock(), self.store.queue_ended_at(name))

    def list(self, params: dict[str, str] | None) -> tuple[list[Queue], str | None]:
        unknown = sorted(set(params or {}) - {"limit", "cursor"})
        if unknown:
            raise ValidationError(unknown[0], "is not a known parameter")
        query = validation.list_query(params)
        return self.store.list_queues(limit=query.limit, cursor=query.cursor)

    def get(self, name: str) -> Queue:
        validation.queue_name(name)
        queue = self.store.get_queue(name, consistent=True)
        if queue is None:
            raise NotFoundError(f"queue {name} does not exist")
        return queue

    def delete(self, name: str) -> None:
        """DELETE of a queue, the one way a queue ends (404 when there is none). It ends, in this order:

        - the queue item, this life of it only (its `created_at`, the epoch): its absence is the tombstone, so a
          dispatcher (which reads it strongly consistently, once per batch and queue) cancels, never delivers, a
          message of a deleted queue or of an earlier life of the name; nothing left pending below is delivered;
        - its entry in the list of queues;
        - its life: the time it ended is noted (a queue created again starts a later epoch), and what it owned
          besides its messages is removed (`keys.QUEUE_SCOPED_PREFIXES`: pacing cursor, windows and key items,
          concurrency slots, schedules, operations and their running entries, status counters, breaker
          windows, owed queue notices);
        - its pending messages, cancelled for as long as the request budget allows (`DELETE_QUEUE_BUDGET`); then
          what the cancels counted (the status counters of this life, never a later one's) is removed.

        A DELETE that dies half-way leaves the rest to a queue created again (`_new_epoch`) and the dispatcher.
        """
        queue = self.get(name)
        self.store.delete_queue(name, queue.created_at)
        self.store.unregister_queue(name)
        self.store.end_queue(name, self.ctx.clock())
        self._cancel_pending(name, queue.partitions)
        self.store.clear_queue_items(name, [keys.count_prefix(to_ms(queue.created_at))])

    def _cancel_pending(self, name: str, partitions: int) -> None:
        started = self.ctx.clock()
        cursor = None
        while self.ctx.clock() - started < DELETE_QUEUE_BUDGET:
            pending, cursor = self.store.list_messages(
                name, status=Status.PENDING, limit=100, cursor=cursor, partitions=partitions
            )
            for message in pending:
                with contextlib.suppress(StaleVersionError):
                    transitions.cancel(self.ctx, message, self.ctx.clock())
            if cursor is None:
                return
        log("delete_queue_incomplete", queue=name)
