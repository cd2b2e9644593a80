"""The `later`-compatible API (btfak/later): create, delete and query tasks, as messages of `@later`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hourglass.core import validation
from hourglass.core.admission import Fields, admit
from hourglass.core.ids import new_id
from hourglass.core.model import (
    LATER_BACKOFF_BASE,
    LATER_BACKOFF_MAX,
    LATER_NAMESPACE,
    LaterTarget,
    Message,
    NewMessage,
    Queue,
    QueueSettings,
    RetryPolicy,
    Status,
)
from hourglass.errors import NotFoundError
from hourglass.service import targets
from hourglass.service.context import Context
from hourglass.service.messages import Messages

LATER_SETTINGS = QueueSettings(max_delay=validation.MAX_HORIZON)
LATER_FIELDS = Fields(body="content", target="callback")


class Later:
    def __init__(self, ctx: Context, messages: Messages) -> None:
        self.ctx = ctx
        self.messages = messages

    def create(self, doc: Any) -> Message:
        task = validation.later_task(doc)
        target = LaterTarget(task.callback)
        targets.check_allowed(self.ctx, target, "callback")
        now = self.ctx.clock()
        queue = Queue(LATER_NAMESPACE, LATER_SETTINGS, created_at=now)
        retry = RetryPolicy(max_attempts=task.retry + 1, backoff_base=LATER_BACKOFF_BASE, backoff_max=LATER_BACKOFF_MAX)
        request = NewMessage(body=task.content, delay=task.delay, target=target, topic=task.topic, retry=retry)
        message = admit(queue, request, now, new_id(), LATER_FIELDS)
        return self.messages.store_new([replace(message, queue_epoch=None)], now)[0][0]

    def delete(self, doc: Any) -> None:
        message_id = validation.later_id(doc)
        message = self.messages.get(LATER_NAMESPACE, message_id)
        if message.status in (Status.DELIVERED, Status.FAILED, Status.EXPIRED):
            raise NotFoundError(f"task {message_id} has finished")
        self.messages.cancel(LATER_NAMESPACE, message_id)

    def query(self, doc: Any) -> Message:
        """A task; as in `later`, where /delete removes it, a deleted (cancelled) task is not found."""
        message_id = validation.later_id(doc)
        message = self.messages.get(LATER_NAMESPACE, message_id)
        if message.status is Status.CANCELLED:
            raise NotFoundError(f"task {message_id} was deleted")
        return message
