"""Admission: how a validated message request becomes a stored message (due time, expiry, status)."""

from __future__ import annotations

from datetime import datetime, timedelta

from hourglass.core import schedule
from hourglass.core.model import Message, NewMessage, Queue, Status


def admit(queue: Queue, request: NewMessage, now: datetime, message_id: str) -> Message:
    """The new message; one due after its expiry is stored as expired and never delivered."""
    due = schedule.due_time(
        now, delay=request.delay, deliver_at=request.deliver_at, default_delay=queue.settings.default_delay
    )
    ttl = request.ttl if request.ttl is not None else queue.settings.ttl
    expires = now + timedelta(seconds=ttl) if ttl is not None else None
    return Message(
        id=message_id,
        queue=queue.name,
        body=request.body,
        status=Status.EXPIRED if expires is not None and due > expires else Status.PENDING,
        created_at=now,
        due_at=due,
        expires_at=expires,
        dedup_id=request.dedup_id,
        target=request.target,
        queue_epoch=queue.created_at,
    )
