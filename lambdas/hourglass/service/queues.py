"""Queue use cases behind the REST API: create or replace, list, read, delete."""

from __future__ import annotations

from typing import Any

from hourglass.core import delivery_control, validation
from hourglass.core.model import Queue
from hourglass.errors import NotFoundError, ValidationError
from hourglass.service import targets
from hourglass.service.context import Context


class Queues:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store = ctx.store

    def put(self, name: str, doc: Any) -> tuple[Queue, bool]:
        validation.queue_name(name)
        settings = validation.queue_settings(doc)
        targets.check_allowed(self.ctx, settings.target, "target")
        existing = self.store.get_queue(name, consistent=True)
        # PUT leaves the paused state as it is (only /pause and /resume change it).
        control = validation.delivery_control(doc or {}, paused=delivery_control.of(existing).paused)
        targets.check_allowed(self.ctx, control.failure_destination, "failure_destination")
        created_at = existing.created_at if existing else self.ctx.clock()
        queue = Queue(name=name, settings=settings, created_at=created_at, control=control)
        self.store.register_queue(name)  # idempotent; before the queue item, so a listed name may lack one
        return queue, self.store.put_queue(queue)

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
        """Deletes the queue item (and its list entry); `Messages.cancel_pending` then cancels what waits.

        The queue item's absence is the tombstone: the dispatcher reads it strongly consistently
        (once per batch and queue) and cancels, never delivers, a message of a deleted queue or of
        an earlier queue of the same name (its epoch differs), so nothing the cancel pass leaves
        is delivered after the 204.
        """
        self.get(name)
        self.store.delete_queue(name)
        self.store.unregister_queue(name)
