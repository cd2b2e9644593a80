"""Redelivery requests: the optional body of `POST .../redeliver` and when it makes the message due
(the transition itself is `lifecycle.redeliver`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.core import schedule, validation
from hourglass.core.timestamps import parse_rfc3339
from hourglass.errors import ValidationError


@dataclass(frozen=True)
class RedeliverRequest:
    delay: float | None = None
    deliver_at: datetime | None = None

    def due(self, now: datetime) -> datetime:
        """When the redelivered message is due: now unless the request says otherwise."""
        return schedule.due_time(now, delay=self.delay, deliver_at=self.deliver_at, default_delay=0.0)


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
