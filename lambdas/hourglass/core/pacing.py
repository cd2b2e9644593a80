"""Rate-limit pacing: start slots handed out at hand-off from a calendar of windows, so a queue's attempts (and each
flow key's) start at most `rate` a second and a limit holds a start back only where it binds. How a rate slot is
chosen is read in three files: this one (the rule), `service/pacing.py` (the `Pacer` that applies it with
conditional writes, and the dispatcher's re-pacing) and `adapters/pacing_storage.py` (the window items). See
docs/delivery-control.md for why the spacing and start window keep the contract's bound.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
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
# A scope's slots are kept per window of about this long, each with its own pacing item that lists the slots taken
# in it: a start takes the first free instant at or after its due time (a calendar, not a cursor), so a start handed
# off earlier but due later never pushes it back, and a key held far ahead by its own limit leaves the near queue
# slots to other keys. A window is cut into cells one spacing long, at most one slot each (see `_Line`) ...
QUEUE_WINDOW_US = 1_000_000
# ... and has this many cells at least and at most: slow rates get longer windows (their last cell, whose slot
# must be at its start, is a smaller share of the time) and fast ones shorter (a window's list stays small).
MIN_CELLS = 4
MAX_CELLS = 64


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
    """A pacing item: the slots taken in its window (their starts as offsets from the window's start, µs, in
    order; None: never used, or not known) and its record of who holds them (`core.holders`)."""

    taken: tuple[int, ...] | None = None
    held: str | None = None


@dataclass(frozen=True)
class Rates:
    """The rate limits a queue's starts keep at once: queue-wide, and per flow key (v1.2); None: no such limit.
    `floor_us`: the queue's slots start no sooner (set when a PUT moved them to windows of another width,
    `queue_state`)."""

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
    """One stretch of a scope's slots with its own pacing item: starts `index * width_us` to one spacing
    before the next window, so slots of neighbouring windows are a spacing apart too."""

    width_us: int
    index: int


@dataclass(frozen=True)
class Item:
    """One pacing item: a window of the queue's own slots (`scope` None) or of one flow key's ("" for the
    messages without one). The calendar of a scope is its windows: a start takes the first window at or after
    its own due time that has room, so nothing handed off before it can push it later than its window."""

    scope: str | None
    window: Window

    def order(self) -> tuple[int, str]:
        return self.window.index, "" if self.scope is None else "k" + self.scope


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


def window_width(spacing_us: int) -> int:
    """Whole spacings (cells), about QUEUE_WINDOW_US long, within MIN_CELLS and MAX_CELLS."""
    return spacing_us * min(MAX_CELLS, max(MIN_CELLS, -(-QUEUE_WINDOW_US // spacing_us)))


def item_at(scope: str | None, rate: float, at_us: int) -> Item:
    """The pacing item of `scope` (at `rate`) whose window holds the instant `at_us`."""
    width = window_width(pace(rate).spacing_us)
    return Item(scope, Window(width, at_us // width))


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
    """Which pacing items hold the queue's own slots: none (None: no queue rate) or its windows of this width.
    A change of it leaves the old slots unseen."""
    if rates is None or rates.queue is None:
        return None
    return window_width(pace(rates.queue).spacing_us)


# What a caller knows of the pacing items: the slots taken in an item's window (None: unused, or not known yet).
Known = Callable[[Item], tuple[int, ...] | None]


@dataclass(frozen=True)
class ScopedAllocation:
    """Slots in the order given, and the new list of slots taken of each pacing item that moved."""

    slots: tuple[Slot, ...]
    moved: dict[Item, tuple[int, ...]] = field(default_factory=dict)


class _Line:
    """Where one scope's next start may go: the first free instant at or after a threshold in the calendar of its
    windows (`known`: the slots taken in a window, None unused).

    A window is cut into cells one spacing long; a cell holds at most one slot, anywhere in it, and a slot is never
    earlier in its cell than the slot of the cell before (nor later than the one of the cell after): so any two
    slots are a spacing apart or more, and a start due a spacing or more after another is never held back by it.
    The cell before a window's first is the last of the window before: a slot there later than the cell's start
    is also listed in the next window, as a negative offset (a guard), written before the slot's own window."""

    def __init__(self, scope: str | None, spacing_us: int, known: Known) -> None:
        self.scope = scope
        self.spacing_us = spacing_us
        self.known = known
        self.width = window_width(spacing_us)
        self.cells = self.width // spacing_us
        # By window index (the line's scope and width are fixed): the windows changed, and every window's slots
        # by cell, built once per allocation and kept up to date as slots are taken.
        self._moved: dict[int, tuple[int, ...]] = {}
        self._by_cell: dict[int, dict[int, int]] = {}

    @property
    def moved(self) -> dict[Item, tuple[int, ...]]:
        return {Item(self.scope, Window(self.width, index)): taken for index, taken in self._moved.items()}

    def _taken(self, index: int) -> tuple[int, ...]:
        if index in self._moved:
            return self._moved[index]
        return self.known(Item(self.scope, Window(self.width, index))) or ()

    def _cells(self, index: int) -> dict[int, int]:
        cells = self._by_cell.get(index)
        if cells is None:
            cells = self._by_cell[index] = by_cell(self._taken(index), self.spacing_us)
        return cells

    def first(self, threshold: int) -> int:
        at = threshold
        while True:
            index = at // self.width
            base = index * self.width
            after = self._cells(index + 1).get(0)
            offset = free_offset(self._cells(index), self.spacing_us, self.cells, at - base, after)
            if offset is not None:
                return base + offset
            at = base + self.width

    def take(self, start: int) -> None:
        index = start // self.width
        offset = start - index * self.width
        self._moved[index] = tuple(sorted((*self._taken(index), offset)))
        self._cells(index)[offset // self.spacing_us] = offset % self.spacing_us
        if offset // self.spacing_us == self.cells - 1 and offset % self.spacing_us:
            self._moved[index + 1] = with_guard(self._taken(index + 1), offset - self.width)
            self._by_cell[index + 1] = by_cell(self._moved[index + 1], self.spacing_us)


def by_cell(taken: Sequence[int], spacing_us: int) -> dict[int, int]:
    """A window's slots (offsets from its start) as cell -> offset within the cell (a guard's cell is -1)."""
    return {offset // spacing_us: offset % spacing_us for offset in taken}


def free_offset(
    cells_taken: dict[int, int], spacing_us: int, cells: int, lowest: int, after: int | None = None
) -> int | None:
    """The first offset at or after `lowest` where one more slot fits in a window of `cells` cells whose slots are
    `cells_taken` (`by_cell`; see `_Line`; `after`: the offset in its cell of the next window's slot in its first
    cell, if any); None: none left."""
    for cell in range(max(0, lowest // spacing_us), cells):
        if cell in cells_taken:
            continue
        offset = max(lowest - cell * spacing_us, cells_taken.get(cell - 1, 0), 0)
        following = after if cell == cells - 1 else cells_taken.get(cell + 1)
        if following is not None and offset > following:
            continue
        return cell * spacing_us + offset
    return None


def with_guard(taken: Sequence[int], guard: int) -> tuple[int, ...]:
    """A window's list with the guard of the window before (its last slot, as a negative offset): the latest."""
    guards = [offset for offset in taken if offset < 0]
    kept = [offset for offset in taken if offset >= 0]
    return tuple(sorted((max([guard, *guards]), *kept)))


def allocate_scoped(
    rates: Rates,
    starts: Sequence[Start],
    now_ms: int,
    *,
    known: Known,
    lead_ms: int = HANDOFF_LEAD_MS,
) -> ScopedAllocation:
    """Slots for a batch that keep every limit of `rates` at once: the queue's rate over its windows and each
    flow key's over the key's (`known`: what the caller knows of the slots taken in each window). In each scope a
    start takes the first free instant at or after its due time in the calendar of the scope's windows (`_Line`):
    so any two slots of a scope are a spacing apart, and a start is held back only by starts due less than a
    spacing from it, that is, by a limit that binds. The attempt starts within the smallest tolerance, inside
    every scope's.

    Starts are handed out in time order: the next is the earliest possible start; among those the limits
    hold back to the same instant, the highest priority, then the earliest due (ties keep the given order).
    Without limits holding anything back that is due order, so priority never makes an attempt early."""
    paces = [pace(rate) for rate in (rates.queue, rates.key) if rate is not None]
    if not paces:
        raise ValueError("give at least one rate")
    key_pace = None if rates.key is None else pace(rates.key)
    tolerance = min(p.tolerance_us for p in paces)
    floor = (now_ms + lead_ms) * 1000
    queue_line = None if rates.queue is None else _Line(None, pace(rates.queue).spacing_us, known)
    queue_floor = max(floor, rates.floor_us or 0)
    key_lines: dict[str, _Line] = {}
    # Per scope: what is not due yet (latest due last, popped from the end) and what is held back (a heap).
    waiting: dict[str, list[int]] = {}
    for index in sorted(range(len(starts)), key=lambda i: (starts[i].due_ms, i), reverse=True):
        scope = starts[index].scope if key_pace is not None else ""
        waiting.setdefault(scope, []).append(index)
        if key_pace is not None and scope not in key_lines:
            key_lines[scope] = _Line(scope, key_pace.spacing_us, known)

    def fit(scope: str, at: int) -> int:
        """The first instant from `at` on with room in the scope's window and the queue's."""
        while True:
            before = at
            if key_pace is not None:
                at = key_lines[scope].first(at)
            if queue_line is not None:
                at = queue_line.first(max(at, queue_floor))
            if at == before:
                return at

    held: dict[str, list[tuple[int, int, int]]] = {scope: [] for scope in waiting}
    thresholds: dict[str, int] = {}

    def candidate(scope: str) -> tuple[int, int, int, int, str] | None:
        """The scope's next start and who takes it. Its start is never sooner than what is left to start (none of
        it is due sooner than the last threshold), so it only grows, and what is held is due by then."""
        later = waiting[scope]
        if not held[scope] and not later:
            return None
        threshold = max(floor, thresholds.get(scope, 0))
        if not held[scope]:
            threshold = max(threshold, starts[later[-1]].due_ms * 1000)
        threshold = thresholds[scope] = fit(scope, threshold)
        # Everything due by the scope's next start competes for it.
        while later and starts[later[-1]].due_ms * 1000 <= threshold:
            index = later.pop()
            heapq.heappush(held[scope], (-starts[index].priority, starts[index].due_ms, index))
        minus_priority, due, index = held[scope][0]
        return threshold, minus_priority, due, index, scope

    # Each scope's candidate as last computed: a lower bound of what it is now (a threshold only grows), so the
    # least one, computed again, is taken when it is still no greater than the next (lazy: a batch of many keys
    # does not compute every key's again at each start). Starts go in time order, so none is sooner than the
    # queue's first free instant from the last start on: a stale candidate below it is raised to it unrecomputed.
    candidates = [c for c in map(candidate, waiting) if c is not None]
    heapq.heapify(candidates)
    chosen = [0] * len(starts)
    least = 0
    while candidates:
        stale = heapq.heappop(candidates)
        if stale[0] < least:
            heapq.heappush(candidates, (least, *stale[1:]))
            continue
        fresh = candidate(stale[4])
        if fresh is None:
            continue
        if candidates and fresh > candidates[0]:
            heapq.heappush(candidates, fresh)
            continue
        start, _, _, index, scope = fresh
        heapq.heappop(held[scope])
        chosen[index] = start
        if queue_line is not None:
            queue_line.take(start)
            least = queue_line.first(max(start, queue_floor))
        if key_pace is not None:
            key_lines[scope].take(start)
        if (again := candidate(scope)) is not None:
            heapq.heappush(candidates, again)
    # Whole milliseconds inside [slot, slot + tolerance]: rounded up at the start, down at the end.
    slots = tuple(Slot(-(-start // 1000), (start + tolerance) // 1000, queue_line is not None) for start in chosen)
    moved = {} if queue_line is None else dict(queue_line.moved)
    for line in key_lines.values():
        moved.update(line.moved)
    return ScopedAllocation(slots, moved)


def allocate(
    calendar: dict[Item, tuple[int, ...]],
    rate: float,
    due_ms: Sequence[int],
    now_ms: int,
    *,
    lead_ms: int = HANDOFF_LEAD_MS,
) -> tuple[Slot, ...]:
    """Slots for one queue's batch at `rate` from an in-memory calendar of its windows (updated in place): the
    rule of `allocate_scoped` with the queue's rate alone, where every write wins."""
    if not due_ms:
        return ()
    allocation = allocate_scoped(
        Rates(rate), [Start(due) for due in due_ms], now_ms, known=calendar.get, lead_ms=lead_ms
    )
    calendar.update(allocation.moved)
    return allocation.slots


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
