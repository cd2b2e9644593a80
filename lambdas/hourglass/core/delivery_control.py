"""A queue's delivery control (v1.1): rate limit, concurrency limit, attempt timeout, failure destination, pause."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hourglass.core import validation
from hourglass.core.document import target_doc
from hourglass.core.model import HttpTarget, Queue, SqsTarget
from hourglass.errors import ValidationError

MIN_RATE, MAX_RATE = 0.1, 10_000.0
MIN_CONCURRENCY, MAX_CONCURRENCY = 1, 1000
MIN_TIMEOUT, MAX_TIMEOUT, DEFAULT_TIMEOUT = 1.0, 120.0, 15.0
# Fields of a queue's PUT body this module owns; `paused` is read-only there (set by pause/resume).
CONTROL_FIELDS = frozenset({"rate_limit", "max_concurrency", "timeout", "failure_destination", "paused"})

# A start may rely on a (strongly consistent) read of `paused` at most this old, measured from before
# the read was sent; pause answers only after PAUSE_SETTLE, so a start after its 200 saw the pause.
PAUSE_READ_MAX_AGE = timedelta(seconds=1)
PAUSE_SETTLE = timedelta(seconds=1.5)

FailureDestination = HttpTarget | SqsTarget


@dataclass(frozen=True)
class DeliveryControl:
    rate_limit: float | None = None
    max_concurrency: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    failure_destination: FailureDestination | None = None
    paused: bool = False

    @property
    def limited(self) -> bool:
        """Whether attempts need the pacing or lease items; queues without limits pay nothing extra."""
        return self.rate_limit is not None or self.max_concurrency is not None


def delivery_control(doc: Mapping[str, Any], *, paused: bool = False) -> DeliveryControl:
    """The control fields of a PUT body (other fields are left to the queue validator).

    `paused` is the queue's current state: PUT leaves it as it is. A boolean `paused` in the body is
    accepted and ignored (a client may send back what GET returned); anything else is a 400.
    """
    if "paused" in doc and not isinstance(doc["paused"], bool):
        raise ValidationError("paused", "must be a boolean (and is changed only by /pause and /resume)")
    rate = validation.number(doc.get("rate_limit"), "rate_limit", low=MIN_RATE, high=MAX_RATE, allow_none=True)
    raw_concurrency = doc.get("max_concurrency")
    concurrency = (
        None
        if raw_concurrency is None
        else validation.integer(raw_concurrency, "max_concurrency", low=MIN_CONCURRENCY, high=MAX_CONCURRENCY)
    )
    timeout = validation.number(doc.get("timeout", DEFAULT_TIMEOUT), "timeout", low=MIN_TIMEOUT, high=MAX_TIMEOUT)
    assert timeout is not None
    raw_destination = doc.get("failure_destination")
    destination = None if raw_destination is None else validation.target(raw_destination, "failure_destination")
    if destination is not None and not isinstance(destination, HttpTarget | SqsTarget):
        raise ValidationError("failure_destination.type", 'must be "http" or "sqs"')
    return DeliveryControl(rate, concurrency, timeout, destination, paused)


def control_doc(control: DeliveryControl) -> dict[str, Any]:
    """The control fields of the queue document (GET, PUT, pause and resume responses)."""
    return {
        "rate_limit": control.rate_limit,
        "max_concurrency": control.max_concurrency,
        "timeout": control.timeout,
        "failure_destination": target_doc(control.failure_destination),
        "paused": control.paused,
    }


def stored(control: DeliveryControl) -> dict[str, Any]:
    """What goes into the queue item's settings JSON; only what differs from the defaults."""
    doc = control_doc(control)
    defaults = control_doc(DeliveryControl())
    return {key: value for key, value in doc.items() if value != defaults[key]}


def from_stored(doc: Mapping[str, Any]) -> DeliveryControl:
    """The control read back from a queue item; it was validated when it was written."""
    return delivery_control(doc, paused=bool(doc.get("paused", False)))


def pause_read_fresh(read_sent_at: datetime, now: datetime) -> bool:
    """Whether a read of the queue sent at `read_sent_at` may still decide that an attempt starts now."""
    return now - read_sent_at <= PAUSE_READ_MAX_AGE


def of(queue: Queue | None) -> DeliveryControl:
    """A queue's control; the default one for a queue stored before v1.1 (and for `@later`)."""
    return queue.control if queue is not None and queue.control is not None else DeliveryControl()
