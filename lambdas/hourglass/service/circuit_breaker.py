"""The circuit breaker of a queue: each attempt outcome counted in shared buckets (one ADD), and on a failure the
window read (one Query) to decide whether the queue pauses itself, says why and tells its failure destination
(through the failure-notice outbox: the pause and the notice it owes are one write)."""

from __future__ import annotations

from datetime import datetime

from hourglass.adapters import storage
from hourglass.core import circuit_breaker, delivery_control, failure_notice
from hourglass.core.model import Queue
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import failure_notices
from hourglass.service.context import Context

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.BreakerTallies


def record(ctx: Context, queue: Queue | None, *, failed: bool, now: datetime) -> None:
    """Counts an attempt that ended at `now`; a failure may trip the breaker. Queues without one pay nothing.
    Never raises: a counter that cannot be written loses one count, never an attempt's outcome."""
    control = delivery_control.of(queue)
    breaker = control.circuit_breaker
    if queue is None or breaker is None:
        return
    try:
        bucket = circuit_breaker.bucket_of(breaker, now)
        # Kept a window past its own bucket, then left to the table's TTL.
        expire_at = (bucket + 1) * circuit_breaker.bucket_seconds(breaker) + breaker.window
        ctx.store.count_outcome(queue.name, control.resumed_at, bucket, failed=failed, expire_at=expire_at)
        if not failed or control.paused:
            return
        first, last = circuit_breaker.window_buckets(breaker, now)
        tally = ctx.store.window_tally(queue.name, control.resumed_at, first, last)
        if not circuit_breaker.trips(breaker, tally):
            return
        ratio = tally.failures / tally.attempts
        notice = failure_notice.queue_paused(queue.name, circuit_breaker.REASON, ratio, now, queue.created_at)
        destination = control.failure_destination
        if not ctx.store.trip(control.resumed_at, notice, notify=destination is not None):
            return  # another dispatcher tripped it, or the queue was paused or resumed meanwhile
    except StoreError as exc:
        log("circuit_breaker_failed", queue=queue.name, error=str(exc))
        return
    ctx.metrics.count("CircuitBreakerTripped", queue=queue.name)
    log("circuit_breaker_tripped", queue=queue.name, attempts=tally.attempts, failures=tally.failures)
    if destination is not None:
        failure_notices.send_queue_paused(ctx, destination, notice)
