"""Redelivery: a finished message made pending again, with a fresh retry budget and no expiry."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from hourglass.core import schedule, validation
from hourglass.core.model import Message, Status
from hourglass.core.timestamps import parse_rfc3339
from hourglass.errors import ConflictError, ValidationError

REDELIVERABLE = frozenset({Status.DELIVERED, Status.FAILED, Status.EXPIRED})


@dataclass(frozen=True)
class RedeliverRequest:
    delay: float | None = None
    deliver_at: datetime | None = None


@dataclass(frozen=True)
class Redelivery:
    """The pending message and `budget_from`: its attempts so far, after which the fresh budget counts."""

    message: Message
    budget_from: int


def redeliver_request(doc: object, now: datetime) -> RedeliverRequest:
    """The optional body of `POST .../redeliver`: `{"delay": s}` or `{"deliver_at": t}`; None means now."""
    if doc is None:
        return RedeliverRequest()
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a JSON object")
    for key in doc:
        if key not in ("delay", "deliver_at"):
            raise ValidationError(key, "is not a known field")
    if doc.get("delay") is not None and doc.get("deliver_at") is not None:
        raise ValidationError("delay", "delay and deliver_at are mutually exclusive")
    delay = validation.number(doc.get("delay"), "delay", low=0, high=validation.MAX_HORIZON, allow_none=True)
    deliver_at = None
    if doc.get("deliver_at") is not None:
        try:
            deliver_at = parse_rfc3339(doc["deliver_at"])
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValidationError("deliver_at", "must be an RFC 3339 date-time with an offset") from exc
        if deliver_at > now + timedelta(seconds=validation.MAX_HORIZON):
            raise ValidationError("deliver_at", "is more than 10 years ahead")
    return RedeliverRequest(delay, deliver_at)


def can_redeliver(status: Status) -> bool:
    return status in REDELIVERABLE


def redeliver(message: Message, request: RedeliverRequest, now: datetime) -> Redelivery:
    """The new message (written conditionally on the old version and status); 409 unless finished."""
    if not can_redeliver(message.status):
        raise ConflictError(f"message is {message.status.value}; only delivered, failed or expired ones redeliver")
    due = schedule.due_time(now, delay=request.delay, deliver_at=request.deliver_at, default_delay=0.0)
    pending = replace(
        message,
        status=Status.PENDING,
        due_at=due,
        version=message.version + 1,
        expires_at=None,
        delivered_at=None,
        claimed_until=None,
        final_attempt=None,
    )
    return Redelivery(pending, budget_from=message.attempts)
