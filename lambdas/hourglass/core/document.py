"""How queues, messages and schedules look in API responses (REST and the later-compatible view)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from hourglass.core import catch_up
from hourglass.core.model import (
    FINISHED,
    Carried,
    DeliveryControl,
    LaterTarget,
    Message,
    Notice,
    Queue,
    RetryPolicy,
    Status,
    Target,
    carried,
)
from hourglass.core.recurrence import NEXT_DUE_COUNT, Schedule
from hourglass.core.timestamps import format_rfc3339, to_ms
from hourglass.core.window import Window
from hourglass.core.window import to_doc as window_doc


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_rfc3339(value)


def target_doc(target: Target | None) -> dict[str, Any] | None:
    if target is None:
        return None
    doc = asdict(target)
    kind = doc.pop("type")
    return {"type": kind, **doc}


def carried_doc(item: Carried) -> dict[str, Any]:
    """The `Carried` fields of a message or schedule as its document shows them."""
    return {name: _shown(value) for name, value in carried(item).items()}


def _shown(value: object) -> object:
    if isinstance(value, Window):
        return window_doc(value)
    if isinstance(value, Target):
        return target_doc(value)
    return value


def queue_doc(queue: Queue) -> dict[str, Any]:
    settings = queue.settings
    return {
        "name": queue.name,
        "default_delay": settings.default_delay,
        "max_delay": settings.max_delay,
        "ttl": settings.ttl,
        "target": target_doc(settings.target),
        "retry": asdict(settings.retry),
        "signing_secret_set": settings.signing_secret is not None,
        "signing_secret_next_set": settings.signing_secret_next is not None,
        "created_at": _time(queue.created_at),
    }


def control_doc(control: DeliveryControl) -> dict[str, Any]:
    """The delivery control fields of the queue document (GET, PUT, pause and resume responses)."""
    return {
        "rate_limit": control.rate_limit,
        "max_concurrency": control.max_concurrency,
        "timeout": control.timeout,
        "failure_destination": target_doc(control.failure_destination),
        "paused": control.paused,
        "window": window_doc(control.window),
        "paused_reason": control.paused_reason,
        "circuit_breaker": None if control.circuit_breaker is None else asdict(control.circuit_breaker),
        "flow_control": None if control.flow_control is None else asdict(control.flow_control),
        "ordering": None if control.ordering is None else asdict(control.ordering),
    }


def message_doc(message: Message, blocked_by: str | None = None) -> dict[str, Any]:
    """`blocked_by` (v1.3): the message of its key a due message waits behind, on an ordered queue."""
    return {
        "id": message.id,
        "queue": message.queue,
        "status": message.status.value,
        "body": message.body,
        "created_at": _time(message.created_at),
        "due_at": _time(message.scheduled),
        "next_attempt_at": _time(next_attempt(message)),
        "expires_at": _time(message.expires_at),
        "attempts": message.attempts,
        "delivered_at": _time(message.delivered_at),
        "finished_at": _time(finished_at(message)),
        "last_error": message.last_error,
        "dedup_id": message.dedup_id,
        "schedule": message.schedule,
        **carried_doc(message),
        # Only a finished version has one (a version made from it in memory may still carry its predecessor's).
        "notice": notice_doc(message.notice) if message.status in FINISHED else None,
        "blocked_by": blocked_by,
    }


def finished_at(message: Message) -> datetime | None:
    """When a finished message reached its status: its delivery, the end of the attempt that ended it, or the
    time its ending kept (`lifecycle`); None while it is not finished, or for a version stored before then."""
    if message.status not in FINISHED:
        return None
    if message.delivered_at is not None:
        return message.delivered_at
    if message.final_attempt is not None:
        return message.final_attempt.finished_at
    return message.finished_at


def next_attempt(message: Message) -> datetime | None:
    """When a pending message's next attempt starts, if not at the time it was scheduled for (a retry
    waiting, or a delivery deferred); None otherwise."""
    if message.status is not Status.PENDING or message.due_at == message.scheduled:
        return None
    return message.due_at


def notice_doc(notice: Notice | None) -> dict[str, Any] | None:
    """The failure notice of a finished message while owed (`pending`) or once given up (`abandoned`)."""
    if notice is None:
        return None
    return {
        "status": notice.status.value,
        "tries": notice.tries,
        "last_error": notice.last_error,
        "next_try_at": _time(notice.next_try_at),
    }


def created_doc(message: Message, duplicate: bool) -> dict[str, Any]:
    return {
        "id": message.id,
        "due_at": _time(message.scheduled),
        "status": message.status.value,
        "duplicate": duplicate,
    }


def later_doc(message: Message) -> dict[str, Any]:
    retry = message.retry or RetryPolicy()
    callback = message.target.url if isinstance(message.target, LaterTarget) else None
    return {
        "id": message.id,
        "topic": message.topic,
        "execute_time": to_ms(message.due_at) // 1000,
        "max_retry": retry.max_attempts - 1,
        "has_retry": max(0, message.attempts - 1),
        "callback": callback,
        "content": message.body,
        "creat_time": to_ms(message.created_at) // 1000,
    }


def schedule_doc(schedule: Schedule, now: datetime, window: Window | None = None) -> dict[str, Any]:
    """The schedule document; `next_due_at` lists when the next three occurrences after `now` that are stored
    are attempted (their jitter included, deferred to the opening of `window`, the occurrences' delivery window,
    when it is closed then: `catch_up.upcoming`), none while paused."""
    recurrence = schedule.recurrence
    upcoming = [] if schedule.paused else catch_up.upcoming(schedule, now, window, NEXT_DUE_COUNT)
    return {
        "name": schedule.name,
        "queue": schedule.queue,
        "cron": None if recurrence.cron is None else recurrence.cron.text,
        "every": recurrence.every,
        "timezone": recurrence.timezone,
        "start_at": _time(recurrence.start_at),
        "end_at": _time(recurrence.end_at),
        "body": schedule.body,
        **carried_doc(schedule),
        "catch_up": recurrence.catch_up.value,
        "jitter": recurrence.jitter,
        "paused": schedule.paused,
        "created_at": _time(schedule.created_at),
        "next_due_at": [_time(at) for at in upcoming],
    }
