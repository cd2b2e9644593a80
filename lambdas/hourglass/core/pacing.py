"""Rate-limit pacing: start slots handed out at hand-off, so a queue's attempts start at most `rate` a second.

See docs/delivery-control.md for why the spacing and the start window below keep the contract's bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

US_PER_S = 1_000_000
# A paced attempt may start this late after its slot at least (more when the rate leaves room).
MIN_TOLERANCE_US = 250_000
# A slot is never sooner than this after the allocation: the timer must reach a dispatcher first.
HANDOFF_LEAD_MS = 1_000


@dataclass(frozen=True)
class Pace:
    """Slots are `spacing_us` apart; an attempt starts between its slot and `tolerance_us` after it."""

    spacing_us: int
    tolerance_us: int


@dataclass(frozen=True)
class Slot:
    """When one paced attempt may start: not before `start_ms`, not after `latest_ms` (epoch ms)."""

    start_ms: int
    latest_ms: int

    def may_start(self, now_ms: int) -> bool:
        return self.start_ms <= now_ms <= self.latest_ms

    def missed(self, now_ms: int) -> bool:
        """Too late to start: the attempt must take a new slot (it stays pending meanwhile)."""
        return now_ms > self.latest_ms


@dataclass(frozen=True)
class Allocation:
    """Slots in the order the due times were given, and the pacing item's new `next_us`."""

    slots: tuple[Slot, ...]
    next_us: int | None


def pace(rate: float) -> Pace:
    """The spacing and start tolerance for `rate` attempts a second.

    With slots `d` apart and starts at most `t` after their slot, a window of W seconds holds at
    most floor((W + t) / d) + 1 starts. When the rate leaves room (t = 1 - 1/rate >= the minimum),
    slots are exactly 1/rate apart and that is <= rate*W + rate. Otherwise slots are 1/rate + t
    apart, which is <= rate*W + 1 for W >= 1/rate and 1 for shorter windows.
    """
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError("rate must be a positive number")
    period = math.ceil(US_PER_S / rate)
    slack = US_PER_S - period
    if slack >= MIN_TOLERANCE_US:
        return Pace(spacing_us=period, tolerance_us=slack)
    return Pace(spacing_us=period + MIN_TOLERANCE_US, tolerance_us=MIN_TOLERANCE_US)


def allocate(
    next_us: int | None, rate: float, due_ms: Sequence[int], now_ms: int, *, lead_ms: int = HANDOFF_LEAD_MS
) -> Allocation:
    """Start slots for a hand-off batch of one queue, given the pacing item's `next_us` (None: never used).

    Slots go in due order (ties keep the given order), each at its due time or the next free slot,
    whichever is later, and never sooner than `lead_ms` from now. The caller writes `next_us` back
    with a conditional write on the value it read; on a lost race it allocates again from the winner's.
    """
    if not due_ms:
        return Allocation((), next_us)
    spacing = pace(rate)
    cursor = max(next_us or 0, (now_ms + lead_ms) * 1000)
    starts = [0] * len(due_ms)
    for index in sorted(range(len(due_ms)), key=lambda i: due_ms[i]):
        start = max(cursor, due_ms[index] * 1000)
        starts[index] = start
        cursor = start + spacing.spacing_us
    # Whole milliseconds inside [slot, slot + tolerance]: rounded up at the start, down at the end.
    slots = tuple(Slot(-(-start // 1000), (start + spacing.tolerance_us) // 1000) for start in starts)
    return Allocation(slots, cursor)


def window_bound(rate: float, window_s: float) -> float:
    """The contract's ceiling on starts over any window of `window_s` >= 1 seconds."""
    return rate * window_s + max(1.0, rate)
