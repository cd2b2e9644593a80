"""The notification sent to a queue's failure destination when one of its messages ends failed or expired."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hourglass.core.model import Message, Status
from hourglass.core.timestamps import format_rfc3339

EVENTS = {Status.FAILED: "message.failed", Status.EXPIRED: "message.expired"}


def notifies(status: Status) -> bool:
    """Whether ending in `status` notifies the failure destination (when the queue has one)."""
    return status in EVENTS


def failure_notice(message: Message, finished_at: datetime) -> dict[str, Any]:
    if not notifies(message.status):
        raise ValueError(f"a {message.status.value} message does not notify the failure destination")
    return {
        "event": EVENTS[message.status],
        "id": message.id,
        "queue": message.queue,
        "status": message.status.value,
        "body": message.body,
        "due_at": format_rfc3339(message.due_at),
        "attempts": message.attempts,
        "last_error": message.last_error,
        "finished_at": format_rfc3339(finished_at),
    }


def notice_headers(message: Message) -> dict[str, str]:
    """Headers of an HTTP notification, besides the destination's own; the id lets a receiver drop repeats."""
    return {
        "Content-Type": "application/json",
        "Hourglass-Event": EVENTS[message.status],
        "Hourglass-Message-Id": message.id,
        "Hourglass-Queue": message.queue,
    }
