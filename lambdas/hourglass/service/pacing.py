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


class _Request:
    """One caller's due times waiting for slots; the thread that writes the pacing item fills in the answer."""

    def __init__(self, rate: float, due_ms: Sequence[int], floor_ms: int) -> None:
        self.rate = rate
        self.due_ms = list(due_ms)
        self.floor_ms = floor_ms
        self.slots: tuple[Slot, ...] | None = None
        self.error: StoreError | None = None


class Pacer:
    """Allocates slots for one queue's hand-off batches; remembers each queue's last `next_us` so the
    first try of a warm process needs no read (a lost race returns the winner's value).

    The threads of one process take turns per queue, and the one whose turn it is allocates for every
    request of that queue waiting meanwhile, in due order, with one write (a group commit): a
    dispatcher's many missed slots cost one pacing write, and the earliest-due of them goes first."""

    def __init__(self, store: PaceStore) -> None:
        self.store = store
        self._known: dict[str, int | None] = {}
        self._queue_locks: dict[str, threading.Lock] = {}
        self._waiting: dict[str, list[_Request]] = {}
        self._lock = threading.Lock()

    def slots(
        self,
        queue: str,
        rate: float,
        due_ms: Sequence[int],
        now: datetime,
        *,
        lead_ms: int = pacing.HANDOFF_LEAD_MS,
        gather: Callable[[], datetime] | None = None,
    ) -> tuple[Slot, ...]:
        """A slot per due time (same order), at or after it and at least `lead_ms` from `now`, spaced
        by the queue's rate across all allocators. `gather` (waits, returns the time after) runs once
        the request is queued: requests that gather until the same instant are allocated together."""
        if not due_ms:
            return ()
        request = _Request(rate, due_ms, to_ms(now) + lead_ms)
        with self._lock:
            queue_lock = self._queue_locks.setdefault(queue, threading.Lock())
            self._waiting.setdefault(queue, []).append(request)
        if gather is not None:
            request.floor_ms = max(request.floor_ms, to_ms(gather()) + lead_ms)
        with queue_lock:
            if request.slots is None and request.error is None:
                with self._lock:
                    waiting = self._waiting.pop(queue, [])
                    group = [r for r in waiting if r.rate == rate]
                    if other := [r for r in waiting if r.rate != rate]:
                        self._waiting[queue] = other
                self._allocate(queue, rate, group)
        if request.error is not None:
            raise request.error
        assert request.slots is not None
        return request.slots

    def _allocate(self, queue: str, rate: float, group: list[_Request]) -> None:
        """Slots for every request of `group` from one conditional write (the caller holds the queue's turn)."""
        due = [d for request in group for d in request.due_ms]
        floor_ms = max(request.floor_ms for request in group)
        expected = self._known.get(queue)
        for _ in range(MAX_ROUNDS):
            allocation = pacing.allocate(expected, rate, due, floor_ms, lead_ms=0)
            assert allocation.next_us is not None
            try:
                written, current = self.store.advance_pace(queue, expected, allocation.next_us)
            except Exception as exc:  # every waiting request gets it, not only the writer's
                for request in group:
                    request.error = exc if isinstance(exc, StoreError) else StoreError(f"pacing failed: {exc}")
                return
            self._known[queue] = current
            if written:
                at = 0
                for request in group:
                    request.slots = allocation.slots[at : at + len(request.due_ms)]
                    at += len(request.due_ms)
                return
            expected = current
        for request in group:
            request.error = StoreError(f"pacing item of queue {queue} kept changing")


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


# Slots starting sooner than this are left to their attempts (they are about to start).
SWAP_MARGIN_MS = 200
# How long a waiting attempt sleeps at most before it looks at its slot again (it may have moved earlier);
# below SWAP_MARGIN_MS + the shortest tolerance (250 ms), so a slot moved earlier is still caught.
BOARD_POLL_S = 0.25


class Waiting:
    """A begun attempt of a rate-limited queue waiting in this process for `slot` (which may change)."""

    def __init__(self, queue: str, due_ms: int, slot: Slot, fits: Callable[[Slot], bool]) -> None:
        self.queue = queue
        self.due_ms = due_ms
        self.slot = slot
        self.fits = fits


class StartBoard:
    """The begun attempts of one process waiting for their slots, per queue. Slots are interchangeable
    (the bound depends only on when starts happen against the slots handed out), so whenever an
    attempt joins, the slots not about to start are dealt out again in due order. A late attempt
    re-paced to the end of the line takes the slot of one due after it, and that far slot passes on
    to ever later-due attempts as they arrive: it ends with one of the last due, not in the middle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Waiting]] = {}

    def join(self, queue: str, due_ms: int, slot: Slot, fits: Callable[[Slot], bool], now_ms: int) -> Waiting:
        """`fits(slot)`: whether the attempt could still start in that slot (its lease, its invocation).
        Slots never go to an attempt due after their start: dealt in due order, the k-th earliest slot
        is at or after the k-th earliest due time, since each slot was at or after its holder's."""
        me = Waiting(queue, due_ms, slot, fits)
        with self._lock:
            others = self._waiting.setdefault(queue, [])
            group = [w for w in others if w.slot.start_ms > now_ms + SWAP_MARGIN_MS]
            if slot.start_ms > now_ms + SWAP_MARGIN_MS:
                group.append(me)
            slots = sorted((w.slot for w in group), key=lambda s: s.start_ms)
            dealt = list(zip(sorted(group, key=lambda w: (w.due_ms, w.slot.start_ms)), slots, strict=True))
            if all(new == w.slot or (new.start_ms >= w.due_ms and w.fits(new)) for w, new in dealt):
                for w, new in dealt:
                    w.slot = new
            others.append(me)
        return me

    def start(self, me: Waiting, now_ms: int) -> Slot | None:
        """The attempt's slot once it has come (the attempt leaves the board, no swap after); else None."""
        with self._lock:
            if me.slot.start_ms > now_ms:
                return None
            self._leave(me)
            return me.slot

    def leave(self, me: Waiting) -> None:
        with self._lock:
            self._leave(me)

    def _leave(self, me: Waiting) -> None:
        waiting = self._waiting.get(me.queue, [])
        if me in waiting:
            waiting.remove(me)
        if not waiting:
            self._waiting.pop(me.queue, None)
