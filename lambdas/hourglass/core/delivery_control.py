"""A queue's delivery control (v1.1): the bounds of its fields, how long a pause read holds, a queue's control.

The type is `model.DeliveryControl`; a PUT body is read by `validation.delivery_control`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hourglass.core.model import DeliveryControl, Queue
from hourglass.core.pacing import Rates

MIN_RATE, MAX_RATE = 0.1, 10_000.0
MIN_CONCURRENCY, MAX_CONCURRENCY = 1, 1000
MIN_TIMEOUT, MAX_TIMEOUT, DEFAULT_TIMEOUT = 1.0, 120.0, DeliveryControl().timeout
# Fields of a queue's PUT body this module owns; `paused` is read-only there (set by pause/resume).
CONTROL_FIELDS = frozenset(
    {
        "rate_limit",
        "max_concurrency",
        "timeout",
        "failure_destination",
        "paused",
        "paused_reason",
        "circuit_breaker",
        "window",
        "flow_control",
        "ordering",
    }
)

# A start may rely on a (strongly consistent) read of `paused` at most this old, measured from before
# the read was sent; pause answers only after PAUSE_SETTLE, so a start after its 200 saw the pause.
PAUSE_READ_MAX_AGE = timedelta(seconds=1)
PAUSE_SETTLE = timedelta(seconds=1.5)
# A paused queue's timer comes back this often (seconds); its message stays pending with its due time.
PAUSE_RECHECK = 2


def pause_read_fresh(read_sent_at: datetime, now: datetime) -> bool:
    """Whether a read of the queue sent at `read_sent_at` may still decide that an attempt starts now."""
    return now - read_sent_at <= PAUSE_READ_MAX_AGE


def of(queue: Queue | None) -> DeliveryControl:
    """A queue's control; the default one for a queue stored before v1.1 (and for `@later`)."""
    return queue.control if queue is not None and queue.control is not None else DeliveryControl()


def claims_hand_offs(control: DeliveryControl) -> bool:
    """Whether the sweep claims a queue's due messages (a conditional write each) before it sends their timers.

    A queue without limits or ordering needs no claim (issue 35: one write unit a message): its timer's start is
    conditional on the message's version, so a second timer of one version (two sweeps of one range, a run that
    died before it saved its watermark) starts nothing twice, and the index entry stays until the start; a
    window's deferral and a breaker's pause rewrite or hold the message as for any timer. Pacing moves an entry's
    keys with its claim; concurrency slots and ordered lines keep one timer per message version."""
    return control.limited or control.ordering is not None


def rates(control: DeliveryControl) -> Rates | None:
    """The rate limits a queue's hand-offs keep at once, queue-wide and per flow key; None: no slots."""
    return Rates(control.rate_limit, control.key_rate_limit, control.pace_floor_us) if control.paced else None
