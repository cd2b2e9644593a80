"""The notification sent to a queue's failure destination when one of its messages ends failed or expired,
and its outbox: due-index keys on the final item until the notice is sent."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hourglass.core.model import Message, Status
from hourglass.core.schedule import SweepKeys, sort_key, sort_key_bound
from hourglass.core.timestamps import format_rfc3339, to_ms

EVENTS = {Status.FAILED: "message.failed", Status.EXPIRED: "message.expired"}
# The due-index partition of notices still to send; not a number, so no sweep of a due bucket reads it.
OUTBOX_PK = "notice#"
# The writer sends the notice right after the final write; recovery takes over an entry this much later.
OUTBOX_GRACE = timedelta(minutes=1)


def outbox_keys(message_id: str, finished_at: datetime) -> SweepKeys:
    """Keys the final write carries when a notice is owed: found by recovery from OUTBOX_GRACE on."""
    return SweepKeys(OUTBOX_PK, sort_key(to_ms(finished_at + OUTBOX_GRACE), message_id))


def outbox_range(now: datetime) -> tuple[str, str]:
    """The outbox sort keys recovery takes at `now`: every entry whose grace has passed."""
    return sort_key_bound(0, upper=False), sort_key_bound(to_ms(now), upper=True)


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
