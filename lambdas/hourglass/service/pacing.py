"""Pacing at hand-off: start slots from a rate-limited queue's `#pace` item, one conditional write per batch.

See docs/delivery-control.md ("Rate limit: pacing at hand-off"); the slot rules are `core.pacing`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from hourglass.core import delivery_control, pacing
from hourglass.core.model import Queue
from hourglass.core.pacing import Slot
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError

# Allocation rounds before giving up (each lost round means another allocator just won).
MAX_ROUNDS = 64
# How long the sweeper trusts what it read of a queue's limits; the dispatcher checks every start
# against the queue it reads anyway, so a stale answer here costs order, never the bound.
CONTROL_TTL = timedelta(seconds=30)


class PaceStore(Protocol):
    def advance_pace(self, queue: str, expected_us: int | None, new_us: int) -> tuple[bool, int | None]: ...


class Pacer:
    """Allocates slots for one queue's hand-off batch; remembers each queue's last `next_us` so the
    first try of a warm process needs no read (a lost race returns the winner's value)."""

    def __init__(self, store: PaceStore) -> None:
        self.store = store
        self._known: dict[str, int | None] = {}
        self._queue_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def slots(self, queue: str, rate: float, due_ms: Sequence[int], now: datetime) -> tuple[Slot, ...]:
        """A slot per due time (same order), at or after it, spaced by the queue's rate across all allocators.

        The threads of one process take turns per queue (a dispatcher's many timers would otherwise
        race each other on the item): only other processes can make a try fail."""
        if not due_ms:
            return ()
        with self._lock:
            queue_lock = self._queue_locks.setdefault(queue, threading.Lock())
        with queue_lock:
            expected = self._known.get(queue)
            for _ in range(MAX_ROUNDS):
                allocation = pacing.allocate(expected, rate, due_ms, to_ms(now))
                assert allocation.next_us is not None
                written, current = self.store.advance_pace(queue, expected, allocation.next_us)
                self._known[queue] = current
                if written:
                    return allocation.slots
                expected = current
        raise StoreError(f"pacing item of queue {queue} kept changing")


class QueueLimits:
    """The sweeper's view of which queues are rate-limited: one read per queue per CONTROL_TTL."""

    def __init__(self, read: Callable[[str], Queue | None], clock: Callable[[], datetime]) -> None:
        self.read = read
        self.clock = clock
        self._seen: dict[str, tuple[datetime, float | None]] = {}
        self._lock = threading.Lock()

    def rate(self, queue: str) -> float | None:
        now = self.clock()
        with self._lock:
            cached = self._seen.get(queue)
        if cached is not None and now - cached[0] < CONTROL_TTL:
            return cached[1]
        rate = delivery_control.of(self.read(queue)).rate_limit
        with self._lock:
            self._seen[queue] = (now, rate)
        return rate
