"""The circuit breaker of a queue: attempt outcomes counted in shared buckets (one ADD per queue and bucket for a
whole dispatcher batch), and after failures the window read (one Query) to decide whether the queue pauses itself,
says why and tells its failure destination (through the failure-notice outbox: the pause and the notice it owes are
one write)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from hourglass.adapters import storage
from hourglass.core import circuit_breaker, delivery_control, failure_notice
from hourglass.core.circuit_breaker import Tally
from hourglass.core.model import Queue
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import failure_notices
from hourglass.service.context import Context

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.BreakerTallies

_counting = threading.local()  # the OutcomeBatch the calling thread counts into (`counting_into`); none: at once


@dataclass
class _Counted:
    queue: Queue
    buckets: dict[int, list[int]] = field(default_factory=dict)  # bucket -> [attempts, failures]
    last: datetime | None = None  # the latest outcome's end


class OutcomeBatch:
    """A dispatcher batch's outcomes per queue and bucket, from any of its threads, written when it ends (`flush`):
    one ADD per queue and bucket instead of one per attempt, so a queue at 10,000 deliveries/s writes its breaker
    about 100 times a second (docs/capacity.md). Its attempts started together, so a failure among them trips
    the breaker no later than one of them would have alone: at the batch's end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, _Counted] = {}

    def add(self, queue: Queue, bucket: int, *, failed: bool, now: datetime) -> None:
        with self._lock:
            counted = self._queues.setdefault(queue.name, _Counted(queue))
            counts = counted.buckets.setdefault(bucket, [0, 0])
            counts[0] += 1
            counts[1] += int(failed)
            counted.last = now if counted.last is None else max(counted.last, now)

    def take(self) -> list[_Counted]:
        with self._lock:
            taken, self._queues = list(self._queues.values()), {}
        return taken


@contextlib.contextmanager
def counting_into(outcomes: OutcomeBatch) -> Iterator[None]:
    """The calling thread's outcomes go to `outcomes` while inside."""
    previous = getattr(_counting, "outcomes", None)
    _counting.outcomes = outcomes
    try:
        yield
    finally:
        _counting.outcomes = previous


def record(ctx: Context, queue: Queue | None, *, failed: bool, now: datetime) -> None:
    """Counts an attempt that ended at `now`; inside `counting_into`, for its batch's `flush`, else at once (a
    failure may trip the breaker). Queues without one pay nothing. Never raises: a counter that cannot be written
    loses its counts, never an attempt's outcome."""
    breaker = delivery_control.of(queue).circuit_breaker
    if queue is None or breaker is None:
        return
    batched: OutcomeBatch | None = getattr(_counting, "outcomes", None)
    outcomes = batched or OutcomeBatch()
    outcomes.add(queue, circuit_breaker.bucket_of(breaker, now), failed=failed, now=now)
    if batched is None:
        flush(ctx, outcomes)


def flush(ctx: Context, outcomes: OutcomeBatch) -> None:
    """Writes what `outcomes` holds: one ADD per queue and bucket; a queue with failures among them reads its window
    and trips if it should."""
    for counted in outcomes.take():
        _write(ctx, counted)


def _write(ctx: Context, counted: _Counted) -> None:
    queue, now = counted.queue, counted.last
    control = delivery_control.of(queue)
    breaker = control.circuit_breaker
    assert breaker is not None and now is not None
    try:
        for bucket, (attempts, failures) in sorted(counted.buckets.items()):
            # Kept a window past its own bucket, then left to the table's TTL.
            expire_at = (bucket + 1) * circuit_breaker.bucket_seconds(breaker) + breaker.window
            ctx.store.count_outcome(
                queue.name, control.resumed_at, bucket, attempts=attempts, failures=failures, expire_at=expire_at
            )
        if not any(failures for _, failures in counted.buckets.values()) or control.paused:
            return
        first, last = circuit_breaker.window_buckets(breaker, now)
        tally = ctx.store.window_tally(queue.name, control.resumed_at, first, last)
        if not circuit_breaker.trips(breaker, tally):
            return
        if not _trip(ctx, queue, tally, now):
            return  # another dispatcher tripped it, or the queue was paused or resumed meanwhile
    except StoreError as exc:
        log("circuit_breaker_failed", queue=queue.name, error=str(exc))
        return


def _trip(ctx: Context, queue: Queue, tally: Tally, now: datetime) -> bool:
    control = delivery_control.of(queue)
    ratio = tally.failures / tally.attempts
    notice = failure_notice.queue_paused(queue.name, circuit_breaker.REASON, ratio, now, queue.created_at)
    destination = control.failure_destination
    if not ctx.store.trip(control.resumed_at, notice, notify=destination is not None):
        return False
    ctx.metrics.count("CircuitBreakerTripped", queue=queue.name)
    log("circuit_breaker_tripped", queue=queue.name, attempts=tally.attempts, failures=tally.failures)
    if destination is not None:
        failure_notices.send_queue_paused(ctx, destination, notice)
    return True
