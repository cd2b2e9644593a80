"""How long one attempt may take, and the leases, function timeout and SQS visibility that keep it safe."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

# From the begin write to the request: the begin is at most this far ahead of the start.
BEGIN_TO_START = 1.0
# After the attempt: history record, outcome write, retry slot, failure notification.
BOOKKEEPING = 30.0
# The longest a dispatcher sleeps before a begin write (anything earlier goes back to the timer queue).
MAX_SLEEP = 3.0
MAX_CONNECT = 5.0
# The longest one attempt can take after its start (HTTP connect + read timeouts, the writes around it):
# an attempt is started, or waits in its dispatcher for a slot, only if this much is left of the invocation.
ATTEMPT_BUDGET = timedelta(seconds=20)
# The project's rule for Lambda event sources: visibility timeout >= 6 x the function timeout. The
# queue's visibility only covers a batch the event source holds (retrying a throttled invocation):
# once the function runs, it owns its records' visibility: it keeps them hidden a short hold ahead
# (HOURGLASS_TIMER_HOLD), renewed while it works (`heartbeat_every`), so a timer whose dispatcher died
# or timed out is handed out again within the hold, not the queue's visibility.
VISIBILITY_FACTOR = 6


def attempt_deadline(started_at: datetime, timeout: float) -> datetime:
    """When a running attempt counts as a retryable timeout."""
    return started_at + timedelta(seconds=timeout)


def delivery_lease(begin_at: datetime, timeout: float) -> datetime:
    """Until when an attempt owns its message (and its concurrency slot): nobody takes over before."""
    return begin_at + timedelta(seconds=BEGIN_TO_START + timeout + BOOKKEEPING)


def http_timeouts(timeout: float) -> tuple[float, float]:
    """(connect, read) for the HTTP adapter, whose whole exchange is cut at their sum = `timeout`."""
    connect = min(MAX_CONNECT, timeout / 2)
    return connect, timeout - connect


def function_timeout(max_timeout: float) -> int:
    """Seconds the dispatcher function needs so no attempt is killed: every timer of an invocation
    runs on its own thread, so the longest one bounds the invocation."""
    return 30 * math.ceil((MAX_SLEEP + BEGIN_TO_START + max_timeout + BOOKKEEPING) / 30)


def visibility_timeout(max_timeout: float) -> int:
    return VISIBILITY_FACTOR * function_timeout(max_timeout)


def heartbeat_every(hold: float) -> float:
    """Seconds between renewals of a hold: a renewal may come almost two intervals late (a busy host)
    and the timer still stays hidden."""
    return hold / 3


# A record that failed with an error comes back after a backoff that doubles per receive, up to the
# queue's own visibility: the redrive's receives then span hours (an outage of the table must not
# dead-letter timers within minutes), while a one-off error is retried within the hold.
ERROR_BACKOFF_CAP = 1080


def error_backoff(hold: float, receives: int) -> int:
    """Seconds a record that failed with an error on its `receives`-th receive stays hidden."""
    return int(min(ERROR_BACKOFF_CAP, hold * 2 ** max(0, min(receives, 16) - 1)))
