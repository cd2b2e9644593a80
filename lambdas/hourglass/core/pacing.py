"""Rate-limit pacing: start slots handed out at hand-off, so a queue's attempts (and each flow key's) start at
most `rate` a second. See docs/delivery-control.md for why the spacing and start window keep the contract's bound.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hourglass.core.model import DEFAULT_PRIORITY

US_PER_S = 1_000_000
# A paced attempt may start this late after its slot at least (more when the rate leaves room).
MIN_TOLERANCE_US = 250_000
# A slot is never sooner than this after the allocation: the timer must reach a dispatcher first.
HANDOFF_LEAD_MS = 1_000
# A timer sent later than this before its slot starts may miss it: the lead a new slot gets (a paced attempt
# begins no sooner than a second after its timer's send, dispatch's WRITE_GRACE, and must start inside the slot).
SEND_LEAD_MS = HANDOFF_LEAD_MS
# With flow keys and a queue-wide rate, the queue's slots are kept per window of about this long, each with
# its own pacing item: a key held far ahead by its own limit takes a queue slot in a far window and leaves
# the near ones to other keys (a single cursor would move past every slot before its own).
QUEUE_WINDOW_US = 1_000_000


@dataclass(frozen=True)
class Pace:
    """Slots are `spacing_us` apart; an attempt starts between its slot and `tolerance_us` after it."""

    spacing_us: int
    tolerance_us: int


@dataclass(frozen=True)
class Slot:
    """When one paced attempt may start: not before `start_ms`, not after `latest_ms` (epoch ms). `queue_scoped`:
    it counts in the queue's own scope; False when taken while the queue had key rates alone, which a queue rate
    added since does not see (the dispatcher gives it a new slot, `service.pacing.PacedStarts.unpaced`)."""

    start_ms: int
    latest_ms: int
    queue_scoped: bool = True

    def may_start(self, now_ms: int) -> bool:
        return self.start_ms <= now_ms <= self.latest_ms

    def missed(self, now_ms: int) -> bool:
        """Too late to start: the attempt must take a new slot (it stays pending meanwhile)."""
        return now_ms > self.latest_ms


@dataclass(frozen=True)
class PaceState:
    """A pacing item's next free slot (None: never used) and its record of who holds its slots (`core.holders`)."""

    next_us: int | None = None
    held: str | None = None


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
    scoped = allocate_scoped(Rates(rate), next_us, {}, [Start(due) for due in due_ms], now_ms, lead_ms=lead_ms)
    return Allocation(scoped.slots, scoped.queue_next)


@dataclass(frozen=True)
class Rates:
    """The rate limits a queue's starts keep at once: queue-wide, and per flow key (v1.2); None: no such limit.
    `floor_us`: the queue's slots start no sooner (set when a PUT moved them to other pacing items, `queue_state`)."""

    queue: float | None = None
    key: float | None = None
    floor_us: int | None = None


@dataclass(frozen=True)
class Start:
    """One attempt that needs a slot: when it is due, its flow key (None shares the key "") and priority;
    `holder`: the message version (id, version) the slot goes to, for the record of who holds it (`core.holders`)."""

    due_ms: int
    key: str | None = None
    priority: int = DEFAULT_PRIORITY
    holder: tuple[str, int] | None = None

    @property
    def scope(self) -> str:
        return self.key or ""


@dataclass(frozen=True)
class Window:
    """One stretch of a queue's slots with its own pacing item: starts `index * width_us` to one spacing
    before the next window, so slots of neighbouring windows are a spacing apart too."""

    width_us: int
    index: int


def window_width(spacing_us: int) -> int:
    """Whole spacings, at least two, about QUEUE_WINDOW_US long."""
    return spacing_us * max(2, -(-QUEUE_WINDOW_US // spacing_us))


def key_paced_since(floor_us: int | None, since_ms: int) -> bool:
    """Whether every attempt of a key that started at or after `since_ms` started in a key pacing slot. A slot
    handed out before the PUT that last moved the queue's slots (`Rates.floor_us`; among such PUTs, one adding a
    key rate to a queue rate) may have none, and is before that floor: its attempt started within a second after."""
    return floor_us is None or since_ms >= floor_us // 1000 + US_PER_S // 1000


def counted(slot: Slot, rates: Rates | None) -> bool:
    """Whether a slot counts in every scope the queue's `rates` keep now: one taken while the queue had key rates
    alone does not once it has a rate of its own (the queue's scope never saw it)."""
    return slot.queue_scoped or rates is None or rates.queue is None


def queue_state(rates: Rates | None) -> int | None:
    """Which pacing items hold the queue's own slots: none (None: no queue rate), its one `#pace` cursor (0), or
    its windows of this width (a queue rate and a key rate). A change of it leaves the old slots unseen."""
    if rates is None or rates.queue is None:
        return None
    return 0 if rates.key is None else window_width(pace(rates.queue).spacing_us)


@dataclass(frozen=True)
class ScopedAllocation:
    """Slots in the order given; the new `next_us` of the queue's pacing item, of each window's and of each
    key's that moved."""

    slots: tuple[Slot, ...]
    queue_next: int | None
    key_next: dict[str, int] = field(default_factory=dict)
    window_next: dict[Window, int] = field(default_factory=dict)


class _QueueLine:
    """Where the queue's next start may go: after its one cursor, or (`windowed`) after the cursor of the
    first window at or after the threshold that still has room (`known`: a window's `next_us`, None unused)."""

    def __init__(self, spacing_us: int, cursor: int, windowed: Callable[[Window], int | None] | None) -> None:
        self.spacing_us = spacing_us
        self.cursor = cursor
        self.known = windowed
        self.width = window_width(spacing_us)
        self.moved: dict[Window, int] = {}

    def first(self, threshold: int) -> int:
        if self.known is None:
            return max(threshold, self.cursor)
        at = max(threshold, self.cursor)
        while True:
            window = Window(self.width, at // self.width)
            moved = self.moved.get(window)
            cursor = moved if moved is not None else self.known(window)
            at = max(at, cursor or 0)
            if at <= (window.index + 1) * self.width - self.spacing_us:
                return at
            at = (window.index + 1) * self.width

    def take(self, start: int) -> None:
        if self.known is None:
            self.cursor = start + self.spacing_us
        else:
            self.moved[Window(self.width, start // self.width)] = start + self.spacing_us


def allocate_scoped(
    rates: Rates,
    queue_next: int | None,
    key_next: Mapping[str, int | None],
    starts: Sequence[Start],
    now_ms: int,
    *,
    lead_ms: int = HANDOFF_LEAD_MS,
    windows: Callable[[Window], int | None] | None = None,
) -> ScopedAllocation:
    """Slots for a batch that keep every limit of `rates` at once, from the pacing items' `next_us` (the
    queue's, and each flow key's: None never used). With both a queue and a key rate the queue's scope is
    kept per `Window` instead (`windows`: the `next_us` known of each; `queue_next` is then only a floor).
    Each scope is the single-rate rule: a start is at or after its scope's cursor, which then moves one
    spacing past it, so each item's slots are a spacing apart (a window's slots end one spacing before the
    next window); the attempt starts within the smallest tolerance, inside the window of every scope.

    Starts are handed out in time order: the next is the earliest possible start; among those the limits
    hold back to the same instant, the highest priority, then the earliest due (ties keep the given order).
    Without limits holding anything back that is due order, so priority never makes an attempt early."""
    paces = [pace(rate) for rate in (rates.queue, rates.key) if rate is not None]
    if not paces:
        raise ValueError("give at least one rate")
    queue_pace = None if rates.queue is None else pace(rates.queue)
    key_pace = None if rates.key is None else pace(rates.key)
    tolerance = min(p.tolerance_us for p in paces)
    floor = (now_ms + lead_ms) * 1000
    windowed = None
    if queue_pace is not None and key_pace is not None:
        windowed = windows or (lambda window: None)
    line = None if queue_pace is None else _QueueLine(queue_pace.spacing_us, max(queue_next or 0, floor), windowed)
    cursors: dict[str, int] = {}
    # Per scope: what is not due yet (latest due last, popped from the end) and what is held back (a heap).
    waiting: dict[str, list[int]] = {}
    for index in sorted(range(len(starts)), key=lambda i: (starts[i].due_ms, i), reverse=True):
        scope = starts[index].scope if key_pace is not None else ""
        waiting.setdefault(scope, []).append(index)
        cursors.setdefault(scope, max(key_next.get(scope) or 0, floor) if key_pace is not None else floor)
    held: dict[str, list[tuple[int, int, int]]] = {scope: [] for scope in waiting}
    thresholds: dict[str, int] = {}
    chosen = [0] * len(starts)
    for _ in range(len(starts)):
        best: tuple[int, int, int, int, str] | None = None
        for scope, later in waiting.items():
            if not held[scope] and not later:
                continue
            # The scope's next start: never sooner than its cursors or what is left to start (none of it is
            # due sooner than the last threshold), so it only grows and what is held is due by then.
            threshold = max(cursors[scope], thresholds.get(scope, 0))
            if not held[scope]:
                threshold = max(threshold, starts[later[-1]].due_ms * 1000)
            if line is not None:
                threshold = line.first(threshold)
            thresholds[scope] = threshold
            # Everything due by the scope's next start competes for it.
            while later and starts[later[-1]].due_ms * 1000 <= threshold:
                index = later.pop()
                heapq.heappush(held[scope], (-starts[index].priority, starts[index].due_ms, index))
            minus_priority, due, index = held[scope][0]
            candidate = (threshold, minus_priority, due, index, scope)
            if best is None or candidate < best:
                best = candidate
        assert best is not None
        start, _, _, index, scope = best
        heapq.heappop(held[scope])
        chosen[index] = start
        if line is not None:
            line.take(start)
        if key_pace is not None:
            cursors[scope] = start + key_pace.spacing_us
    # Whole milliseconds inside [slot, slot + tolerance]: rounded up at the start, down at the end.
    slots = tuple(Slot(-(-start // 1000), (start + tolerance) // 1000, line is not None) for start in chosen)
    moved = cursors if key_pace is not None else {}
    if line is None or line.known is not None:
        return ScopedAllocation(slots, queue_next, dict(moved), {} if line is None else line.moved)
    return ScopedAllocation(slots, line.cursor, dict(moved))


# A slot gives way to a higher priority only this far ahead (and never to a start due after it): its attempt may
# begin up to 2 s before it (dispatch's PACED_BEGIN_LEAD), clocks differ by up to a second, and the timer that
# replaces it needs SEND_LEAD_MS to reach a dispatcher. Nearer, the victim's write would mostly lose to its begin.
GIVE_WAY_MARGIN_MS = 4_000


@dataclass(frozen=True)
class Held:
    """A slot handed off to one message version (`id`, `version`) of a scope, not begun when it was noted."""

    slot: Slot
    scope: str
    priority: int
    id: str
    version: int


@dataclass(frozen=True)
class GiveWay:
    """Start `index` takes `victim`'s slot; the victim is rewritten to wait for the start's own (fresh) slot.
    If that write loses (it began, changed or ended), the start keeps its own slot."""

    index: int
    victim: Held


def give_way(
    held: Sequence[Held], starts: Sequence[Start], slots: Sequence[Slot], now_ms: int, *, keyed: bool
) -> list[GiveWay]:
    """Which starts of a batch just allocated `slots` (same order) take an earlier slot of their scope held by
    a lower priority: the highest priority first (then due order), each the earliest such slot at or after
    both its due time and GIVE_WAY_MARGIN_MS from now and before its own, whose holder passes no lower
    priority on its way to the end of the line (`_goes_last`). The victim takes the start's slot,
    allocated as if it arrived now: each scope keeps its set of slots (so every rate bound), nobody starts
    before its due time, and the victim is delayed to one fresh slot, never dropped. `keyed`: scopes are flow
    keys (else the whole queue is one)."""
    top = max((start.priority for start in starts), default=0)
    free = sorted((h for h in held if h.priority < top), key=lambda h: h.slot.start_ms)
    chosen: list[GiveWay] = []
    for index in sorted(range(len(starts)), key=lambda i: (-starts[i].priority, starts[i].due_ms, i)):
        start = starts[index]
        scope = start.scope if keyed else ""
        floor = max(start.due_ms, now_ms + GIVE_WAY_MARGIN_MS)
        line = [h for h in free if h.scope == scope and h.slot.start_ms < slots[index].start_ms]
        for at, victim in enumerate(line):
            if victim.priority < start.priority and victim.slot.start_ms >= floor and _goes_last(victim, line[at:]):
                free.remove(victim)
                chosen.append(GiveWay(index, victim))
                break
    return chosen


def _goes_last(victim: Held, after: Sequence[Held]) -> bool:
    """Whether moving `victim` behind every slot of `after` (its scope's held slots from its own on) passes no
    lower priority than its own: a message of priority 7 that gave way must not then wait behind a backlog of 1."""
    return all(h.priority >= victim.priority for h in after)


def too_near(slot: Slot, sent_ms: int) -> bool:
    """Whether a timer sent at `sent_ms` comes too late for `slot` (its batch took that long to claim)."""
    return slot.start_ms < sent_ms + SEND_LEAD_MS


def dealt_again(slots: Sequence[Slot], fresh: Sequence[Slot]) -> list[Slot]:
    """A batch's slots once its `len(fresh)` earliest turned out too near at the send: the rest and `fresh` (new,
    from the end of the line) dealt out in the order of the old ones. The batch keeps its order (due order, or
    priority; slots in the same millisecond keep the given order) and every start only moves later, since the
    k-th earliest slot dealt is no earlier than the k-th earliest before; the slots left out stay unused, which
    only lowers the rate."""
    kept = sorted(slots, key=lambda slot: slot.start_ms)[len(fresh) :]
    pool = sorted([*kept, *fresh], key=lambda slot: slot.start_ms)
    ranks = sorted(range(len(slots)), key=lambda i: slots[i].start_ms)
    dealt = list(slots)
    for rank, index in enumerate(ranks):
        dealt[index] = pool[rank]
    return dealt


def window_bound(rate: float, window_s: float) -> float:
    """The contract's ceiling on starts over any window of `window_s` >= 1 seconds."""
    return rate * window_s + max(1.0, rate)
