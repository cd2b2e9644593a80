"""Admission of message versions the store read without their bodies (a bulk operation's page): each body
is read first where its size can matter, then the version is checked as any other (`core.admission`)."""

from __future__ import annotations

from hourglass.adapters import storage
from hourglass.core import limits
from hourglass.core.model import Message, Queue
from hourglass.service.context import Context

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Messages


def with_bodies(ctx: Context, messages: list[Message], queue: Queue | None) -> list[Message]:
    """`messages`, with the bodies kept outside their items read when their target has a payload limit (an
    SQS queue), so that `admission.check` measures them; other messages cost nothing."""
    queue_target = queue.settings.target if queue is not None else None
    unread = [
        m
        for m in messages
        if m.body is None and m.body_ref is not None and limits.payload_limit(m.target or queue_target) is not None
    ]
    if not unread:
        return messages
    read = {m.id: m for m in ctx.store.read_bodies(unread)}
    return [read.get(m.id, m) for m in messages]
