"""Pacing: start slots from a rate-limited queue's `#pace` item (one conditional write per batch), and the
dispatcher's side of it (new slots for late timers, a begun attempt waiting for its slot).

See docs/delivery-control.md ("Rate limit: pacing at hand-off"); the slot rules are `core.pacing`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from hourglass.adapters.metrics import Metrics
from hourglass.adapters.store import Store
from hourglass.core import delivery_control, holders, pacing, schedule
from hourglass.core.admission import MAX_PRIORITY
from hourglass.core.deadline import ATTEMPT_BUDGET, BOOKKEEPING, attempt_deadline
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.handoff import Timer
from hourglass.core.model import DEFAULT_PRIORITY, LATER_NAMESPACE, Message, Queue, Status
from hourglass.core.pacing import Held, PaceState, Rates, Slot, Start, Window
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import StoreError
from hourglass.logs import log


class Context(Protocol):
    """The parts of `service.context.Context` the dispatcher's pacing uses (pacing sits below the context)."""

    @property
    def store(self) -> Store: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def pacer(self) -> Pacer: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def sleep(self) -> Callable[[float], None]: ...


# Allocation rounds before giving up (each lost round means another allocator just won).
MAX_ROUNDS = 64
# Windows of a queue's slots read at once after a lost write on one (a process new to a backlogged queue
# learns where its backlog ends in a few rounds, not one window per round).
WINDOWS_READ_AHEAD = 100
# How long the sweeper trusts what it read of a queue's limits; the dispatcher checks every start
# against the queue it reads anyway, so a stale answer here costs order, never the bound.
CONTROL_TTL = timedelta(seconds=30)


class PaceStore(Protocol):
    def advance_pace(
        self,
        queue: str,
        expected_us: int | None,
        new_us: int,
        flow_key: str | None = None,
        window: tuple[int, int] | None = None,
    ) -> tuple[bool, int | None]: ...

    def pace_windows(self, queue: str, width_us: int, first: int, count: int) -> dict[int, int]: ...


@runtime_checkable
class HeldStore(PaceStore, Protocol):
    """A pacing store that also keeps the record of who holds a scope's slots (`core.holders`)."""

    def advance_held(
        self, queue: str, flow_key: str | None, expected: PaceState, new_us: int, new_held: str | None
    ) -> tuple[bool, PaceState]: ...

    def pace_state(self, queue: str, flow_key: str | None) -> PaceState: ...

    def held_fence(self, queue: str, flow_key: str | None, expected: str | None, new: str | None) -> dict[str, Any]: ...

    def held_room(self, queue: str, flow_key: str | None) -> int: ...


# A pacing item: the queue's (None), a flow key's, or a window of the queue's slots.
Scope = str | Window | None


class _Request:
    """One caller's starts waiting for slots; the thread that writes the pacing items fills in the answer.
    `moving`: slots of a batch about to be dealt out again (`HandOff.in_slot_order`), with their holders: their
    record entries go in the same write, and the request is `aborted` if a higher priority took one meanwhile."""

    def __init__(self, rates: Rates, starts: Sequence[Start], floor_ms: int, moving: Sequence[Held] = ()) -> None:
        self.rates = rates
        self.starts = list(starts)
        self.floor_ms = floor_ms
        self.moving = tuple(moving)
        self.slots: tuple[Slot, ...] | None = None
        self.error: StoreError | None = None
        self.aborted = False

    @property
    def done(self) -> bool:
        return self.slots is not None or self.error is not None or self.aborted


# Pacing items' values a process remembers (a cache: a stale one costs a lost round, never the bound).
MAX_KNOWN = 10_000


class Pacer:
    """Allocates slots for one queue's hand-off batches; remembers each pacing item's last `next_us` so the
    first try of a warm process needs no read (a lost race returns the winner's value).

    The threads of one process take turns per queue, and the one whose turn it is allocates for every
    request of that queue waiting meanwhile, in due order, with one write per pacing item (a group commit):
    a dispatcher's many missed slots cost one pacing write, and the earliest-due of them goes first. With
    flow keys (v1.2) the same rule runs per scope: each key's item and the queue's (`pacing.allocate_scoped`)."""

    def __init__(self, store: PaceStore) -> None:
        self.store = store
        self._known: dict[tuple[str, Scope], int | None] = {}
        # The record of who holds each scope's slots, as last written or read (`core.holders`).
        self._held: dict[tuple[str, str | None], str | None] = {}
        self._queue_locks: dict[str, threading.Lock] = {}
        self._waiting: dict[str, list[_Request]] = {}
        self._lock = threading.Lock()
        self.held = HeldSlots()
        # The store's side of the records of who holds slots (every real store has one; a test's fake may not).
        self._records_store: HeldStore | None = store if isinstance(store, HeldStore) else None

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
        starts = [Start(due) for due in due_ms]
        return self.scoped_slots(queue, Rates(rate), starts, now, lead_ms=lead_ms, gather=gather)

    def scoped_slots(
        self,
        queue: str,
        rates: Rates,
        starts: Sequence[Start],
        now: datetime,
        *,
        lead_ms: int = pacing.HANDOFF_LEAD_MS,
        gather: Callable[[], datetime] | None = None,
    ) -> tuple[Slot, ...]:
        """`slots` for starts that keep the queue's rate and their flow keys' at once (`Rates`)."""
        if not starts:
            return ()
        request = self._run(queue, rates, _Request(rates, starts, to_ms(now) + lead_ms), gather, lead_ms)
        assert request.slots is not None
        return request.slots

    def redeal(
        self, queue: str, rates: Rates, moving: Sequence[Held], starts: Sequence[Start], now: datetime
    ) -> tuple[Slot, ...] | None:
        """Fresh slots for `starts` while the batch's `moving` slots are dealt out again by the caller: their
        record entries go in the same write. None (nothing written) when a higher priority took one of them."""
        request = self._run(queue, rates, _Request(rates, starts, to_ms(now) + pacing.HANDOFF_LEAD_MS, moving))
        return None if request.aborted else request.slots

    def _run(
        self,
        queue: str,
        rates: Rates,
        request: _Request,
        gather: Callable[[], datetime] | None = None,
        lead_ms: int = pacing.HANDOFF_LEAD_MS,
    ) -> _Request:
        with self._lock:
            queue_lock = self._queue_locks.setdefault(queue, threading.Lock())
            self._waiting.setdefault(queue, []).append(request)
        if gather is not None:
            request.floor_ms = max(request.floor_ms, to_ms(gather()) + lead_ms)
        with queue_lock:
            if not request.done:
                with self._lock:
                    waiting = self._waiting.pop(queue, [])
                    group = [r for r in waiting if r.rates == rates]
                    if other := [r for r in waiting if r.rates != rates]:
                        self._waiting[queue] = other
                self._allocate(queue, rates, group)
        if request.error is not None:
            raise request.error
        return request

    def _allocate(self, queue: str, rates: Rates, group: list[_Request]) -> None:
        """Slots for every request of `group` (the caller holds the queue's turn): the keys' items are written
        first, then the queue's (or its windows', in time order), each conditionally, the record of who holds
        the slots with its scope's cursor (`core.holders`). A lost write starts a new round from the winner's
        value (after a window's, with the windows after it read in one Query); the slots of items already
        written in the lost round stay unused (a gap only lowers a rate)."""
        for _ in range(MAX_ROUNDS):
            for request in group:
                request.aborted = bool(request.moving) and self._taken(queue, rates, request.moving)
            live = [request for request in group if not request.aborted]
            if not live:
                return
            starts = [start for request in live for start in request.starts]
            floor_ms = max(request.floor_ms for request in live)
            scopes = {start.scope for start in starts} if rates.key is not None else set()
            key_next = {scope: self._known.get((queue, scope)) for scope in scopes}
            known: dict[Scope, int | None] = dict(key_next.items())
            allocation = pacing.allocate_scoped(
                rates,
                _later(self._known.get((queue, None)), rates.floor_us),
                key_next,
                starts,
                floor_ms,
                lead_ms=0,
                windows=lambda window: self._known.get((queue, window)),
            )
            writes: list[tuple[Scope, int]] = [*sorted(allocation.key_next.items())]
            for window, new in sorted(allocation.window_next.items(), key=lambda item: item[0].index):
                known[window] = self._known.get((queue, window))
                writes.append((window, new))
            if rates.queue is not None and rates.key is None:
                assert allocation.queue_next is not None
                known[None] = self._known.get((queue, None))
                writes.append((None, allocation.queue_next))
            records = self._records(queue, rates, live, allocation.slots, floor_ms)
            try:
                won = True
                for scope, new in writes:
                    if not self._advance(queue, scope, new, known[scope], records):
                        won = False
                        if isinstance(scope, Window):
                            self._read_ahead(queue, scope)
                        break
            except Exception as exc:  # every waiting request gets it, not only the writer's
                for request in live:
                    request.error = exc if isinstance(exc, StoreError) else StoreError(f"pacing failed: {exc}")
                return
            if won:
                at = 0
                for request in live:
                    request.slots = allocation.slots[at : at + len(request.starts)]
                    at += len(request.starts)
                return
        for request in group:
            request.error = StoreError(f"pacing item of queue {queue} kept changing")

    def _records(
        self, queue: str, rates: Rates, live: Sequence[_Request], slots: Sequence[Slot], now_ms: int
    ) -> dict[str | None, str | None]:
        """The new record of each scope written: the starts that name their message version and this process's
        notes of slots it does not list, added as room allows, and the entries of slots dealt out again
        (`_Request.moving`) taken off."""
        if self._records_store is None:
            return {}
        added: dict[str | None, list[Held]] = {}
        forget: dict[str | None, set[str]] = {}
        starts = [start for request in live for start in request.starts]
        for start, slot in zip(starts, slots, strict=True):
            if holders.listed(start):
                assert start.holder is not None
                held = Held(slot, _held_scope(rates, start.scope), start.priority, *start.holder)
                added.setdefault(_record_scope(rates, start.scope), []).append(held)
        for request in live:
            for moving in request.moving:
                forget.setdefault(_record_scope(rates, moving.scope), set()).add(moving.id)
        records: dict[str | None, str | None] = {}
        noted = self.held.candidates(queue, rates, now_ms + pacing.GIVE_WAY_MARGIN_MS)
        for scope in {*added, *forget}:
            old = self._held.get((queue, scope))
            entries = holders.parse(old, _held_scope(rates, scope or ""))
            # This process's notes of slots the record does not list yet (a backlog beyond its room when handed
            # off, whose first slots have passed since) refill it: a note is exact (see `HeldSlots`).
            listed = {held.slot.start_ms for held in entries}
            taking = {held.id for held in added.get(scope, [])} | forget.get(scope, set())
            added.setdefault(scope, []).extend(
                h
                for h in noted
                if _record_scope(rates, h.scope) == scope and h.slot.start_ms not in listed and h.id not in taking
            )
            room = self._records_store.held_room(queue, scope)
            kept = holders.recorded(entries, added.get(scope, []), now_ms, room, forget=forget.get(scope, ()))
            new = holders.render(kept)
            if new != old:
                records[scope] = new
        return records

    def _taken(self, queue: str, rates: Rates, moving: Sequence[Held]) -> bool:
        by_scope: dict[str | None, list[Held]] = {}
        for held in moving:
            by_scope.setdefault(_record_scope(rates, held.scope), []).append(held)
        return any(
            holders.taken(holders.parse(self._held.get((queue, scope)), _held_scope(rates, scope or "")), group)
            for scope, group in by_scope.items()
        )

    def holders(self, queue: str, rates: Rates, scopes: Iterable[str]) -> list[Held]:
        """The slots recorded as held in these scopes (flow keys; "" for the queue's own scope), as last known."""
        found = []
        for scope in {_record_scope(rates, scope) for scope in scopes}:
            found += holders.parse(self._held.get((queue, scope)), _held_scope(rates, scope or ""))
        return found

    def swap(self, queue: str, rates: Rates, victim: Held, taker: Held | None, fresh: Slot) -> Swap:
        """The record's change when `taker` takes `victim`'s slot (`holders.swapped`), as a transaction's fence
        on the record as last known (None when it does not change, or the store keeps no records); `settle` it
        once written, or `refresh` the record when it lost."""
        scope = _record_scope(rates, victim.scope)
        old = self._held.get((queue, scope))
        new = holders.render(holders.swapped(holders.parse(old, victim.scope), victim, taker, fresh))
        store = self._records_store
        fence = None if new == old or store is None else store.held_fence(queue, scope, old, new)
        return Swap(queue, scope, old, new, fence)

    def settle(self, swap: Swap) -> None:
        self._held[(swap.queue, swap.scope)] = swap.held

    def refresh(self, queue: str, rates: Rates, scope: str) -> str | None:
        """The record (and cursor) of a scope read again, after a give-way whose fence lost: the record now."""
        assert self._records_store is not None  # a fence comes only from a store that keeps records
        record = _record_scope(rates, scope)
        state = self._records_store.pace_state(queue, record)
        self._known[(queue, record)] = state.next_us
        self._held[(queue, record)] = state.held
        return state.held

    def _read_ahead(self, queue: str, window: Window) -> None:
        """What the windows after a lost one hold now (unused ones: None); the lost one's value came with
        the failed write."""
        held = self.store.pace_windows(queue, window.width_us, window.index + 1, WINDOWS_READ_AHEAD)
        if len(self._known) + WINDOWS_READ_AHEAD >= MAX_KNOWN:
            self._known.clear()
        for index in range(window.index + 1, window.index + 1 + WINDOWS_READ_AHEAD):
            self._known[(queue, Window(window.width_us, index))] = held.get(index)

    def _advance(
        self, queue: str, scope: Scope, new_us: int, expected: int | None, records: dict[str | None, str | None]
    ) -> bool:
        """One pacing item's conditional write (with its new record, if that changes); remembers the value it
        now holds (ours or the winner's)."""
        if self._records_store is not None and not isinstance(scope, Window):
            # Conditional on the record too, even unchanged: the writer learns it, for giving way next.
            before = PaceState(expected, self._held.get((queue, scope)))
            record = records.get(scope, before.held)
            written, state = self._records_store.advance_held(queue, scope, before, new_us, record)
            self._held[(queue, scope)] = state.held
            self._known[(queue, scope)] = state.next_us
            return written
        if scope is None:
            written, current = self.store.advance_pace(queue, expected, new_us)
        elif isinstance(scope, Window):
            window = (scope.width_us, scope.index)
            written, current = self.store.advance_pace(queue, expected, new_us, window=window)
        else:
            written, current = self.store.advance_pace(queue, expected, new_us, scope)
        if len(self._known) >= MAX_KNOWN:
            self._known.clear()
        self._known[(queue, scope)] = current
        return written


@dataclass(frozen=True)
class Swap:
    """A give-way's change of a scope's record (`Pacer.swap`): `fence` makes it part of the victim's write (None:
    the record does not change, the victim being one this process noted, `HeldSlots`)."""

    queue: str
    scope: str | None
    before: str | None
    held: str | None
    fence: dict[str, Any] | None


def _record_scope(rates: Rates, scope: str) -> str | None:
    """The pacing item that records who holds a start's slot: its flow key's where keys are limited, else the
    queue's (whose windows, with a queue rate too, record nothing: a give-way stays within one key)."""
    return scope if rates.key is not None else None


def _held_scope(rates: Rates, scope: str) -> str:
    return scope if rates.key is not None else ""


def _later(cursor: int | None, floor: int | None) -> int | None:
    return cursor if floor is None else max(cursor or 0, floor)


class PaceStates(Protocol):
    def pace_cursor(self, queue: str) -> int | None: ...

    def last_window(self, queue: str, width_us: int) -> int | None: ...


def floor_after(store: PaceStates, queue: str, before: DeliveryControl, after: DeliveryControl) -> int | None:
    """Where a queue's slots start after a PUT from `before` to `after` (`DeliveryControl.pace_floor_us`). When it
    moves them to other pacing items (`pacing.queue_state`: `#pace` and windows, or windows of another width) the
    new ones start at the old ones' next free slot, read here, so every slot of before and after is a spacing
    apart; it also tells the dispatcher until when a key's attempts may have started outside a key pacing slot.
    None once the queue has no rate limit (its slots no longer hold anything back)."""
    old, new = delivery_control.rates(before), delivery_control.rates(after)
    if new is None:
        return None
    was = pacing.queue_state(old)
    if was is None or was == pacing.queue_state(new):
        return before.pace_floor_us
    left = store.pace_cursor(queue) if was == 0 else store.last_window(queue, was)
    return _later(left, before.pace_floor_us)


# Slots a process remembers per queue and rates for giving way to a higher priority (the latest noted).
MAX_HELD = 256


class HeldSlots:
    """The future slots this process handed off to messages that a higher priority may still take
    (`pacing.give_way`), per queue and rates, beside the scopes' records (which keep only the first few of a
    backlog, to stay within a write unit): memory only. A slot is noted once its timer is sent (what its
    message's version waits for, after any re-deal) and taken at most once; a stale note costs the victim's
    conditional write, never a slot (see `service.handoff`)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, Rates], list[Held]] = {}
        self._lock = threading.Lock()

    def note(self, queue: str, rates: Rates, held: Sequence[Held]) -> None:
        """Slots just sent; a message of the highest priority never gives way, so it is not kept."""
        kept = [h for h in held if h.priority < MAX_PRIORITY]
        if not kept:
            return
        with self._lock:
            if len(self._held) >= MAX_KNOWN:
                self._held.clear()
            line = self._held.setdefault((queue, rates), [])
            line.extend(kept)
            del line[: max(0, len(line) - MAX_HELD)]

    def candidates(self, queue: str, rates: Rates, now_ms: int) -> list[Held]:
        """The future slots noted here for these rates."""
        with self._lock:
            line = self._held.get((queue, rates), [])
            line[:] = [h for h in line if h.slot.start_ms > now_ms]
            return list(line)

    def forget(self, queue: str, rates: Rates, taken: Sequence[Held]) -> None:
        """Slots chosen to be taken: no one here chooses them again."""
        with self._lock:
            line = self._held.get((queue, rates), [])
            line[:] = [h for h in line if h not in taken]


class QueueLimits:
    """The sweeper's view of which queues are rate-limited: one read per queue per CONTROL_TTL."""

    def __init__(self, read: Callable[[str], Queue | None], clock: Callable[[], datetime]) -> None:
        self.read = read
        self.clock = clock
        self._seen: dict[str, tuple[datetime, Rates | None]] = {}
        self._lock = threading.Lock()

    def rate(self, queue: str) -> Rates | None:
        now = self.clock()
        with self._lock:
            cached = self._seen.get(queue)
        if cached is not None and now - cached[0] < CONTROL_TTL:
            return cached[1]
        rate = delivery_control.rates(delivery_control.of(self.read(queue)))
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

    def __init__(
        self, queue: str, due_ms: int, slot: Slot, fits: Callable[[Slot], bool], priority: int = DEFAULT_PRIORITY
    ) -> None:
        self.queue = queue
        self.due_ms = due_ms
        self.priority = priority
        self.slot = slot
        self.fits = fits


def board_line(timer: Timer, rates: Rates) -> str:
    """Which waiting attempts may swap slots: a slot keeps the bound of every scope it was allocated in, so
    with limits per key only attempts of the same key trade (any two of them keep the queue's bound too)."""
    return timer.queue if rates.key is None else f"{timer.queue}\x00{timer.scope}"


def _rank(priority_weight: int, waiting: Waiting) -> tuple[int, int, int]:
    return priority_weight * waiting.priority, waiting.due_ms, waiting.slot.start_ms


class StartBoard:
    """The begun attempts of one process waiting for their slots, per queue. Slots are interchangeable
    (the bound depends only on when starts happen against the slots handed out), so whenever an
    attempt joins, the slots not about to start are dealt out again in due order. A late attempt
    re-paced to the end of the line takes the slot of one due after it, and that far slot passes on
    to ever later-due attempts as they arrive: it ends with one of the last due, not in the middle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Waiting]] = {}

    def join(
        self,
        queue: str,
        due_ms: int,
        slot: Slot,
        fits: Callable[[Slot], bool],
        now_ms: int,
        priority: int = DEFAULT_PRIORITY,
    ) -> Waiting:
        """`fits(slot)`: whether the attempt could still start in that slot (its lease, its invocation).
        Slots never go to an attempt due after their start: dealt by priority then due order when that
        keeps every one at or after its due time, else in due order, where the k-th earliest slot is at
        or after the k-th earliest due time, since each slot was at or after its holder's."""
        me = Waiting(queue, due_ms, slot, fits, priority)
        with self._lock:
            others = self._waiting.setdefault(queue, [])
            group = [w for w in others if w.slot.start_ms > now_ms + SWAP_MARGIN_MS]
            if slot.start_ms > now_ms + SWAP_MARGIN_MS:
                group.append(me)
            slots = sorted((w.slot for w in group), key=lambda s: s.start_ms)
            for weight in (-1, 0):  # by priority first, else by due time alone
                ranked = sorted(group, key=functools.partial(_rank, weight))
                dealt = list(zip(ranked, slots, strict=True))
                if all(new == w.slot or (new.start_ms >= w.due_ms and w.fits(new)) for w, new in dealt):
                    for w, new in dealt:
                        w.slot = new
                    break
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


# The dispatcher's side ------------------------------------------------------------------------
# A missed pacing slot is re-paced by the dispatcher that holds the timer, so the new slot needs only
# the begin write's lead (dispatch's BEGIN_LEAD) and none for a trip through the timer queue ...
REPACE_LEAD_MS = 500
# ... and the attempt waits there for it when it is at most this far off and the invocation's deadline
# leaves room: sent round the timer queue again it would reach a dispatcher late again.
REPACE_HOLD = timedelta(seconds=30)
# New slots one timer takes within one invocation before it goes back to the timer queue.
MAX_REPACES = 5
# A begun attempt whose slot went by during the begin write needs no write before its new slot.
BEGUN_LEAD_MS = 50
# Timers of a rate-limited queue that come without a slot (back from a pause) wait in their dispatcher
# until this long after the first of them, then take slots together in due order (one pacing write):
# every timer parked before the resume is back by then (PAUSE_RECHECK), so the drain keeps due order.
RESUME_GATHER = timedelta(seconds=delivery_control.PAUSE_RECHECK + 1)
# A paced attempt reads the pause state again this long before its slot (within PAUSE_READ_MAX_AGE).
PAUSE_READ_AHEAD = timedelta(milliseconds=500)


class PacedStarts:
    """A dispatcher's side of pacing: timers that come too late for their slots (or without one, back from
    a pause) take new ones, a paced timer of a queue whose limit was removed goes at its message's due
    time, and a begun attempt waits for its slot on this process's start board."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.board = StartBoard()
        self._gathers: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def repace_batch(self, timers: Sequence[Timer], control: Callable[[str], DeliveryControl]) -> dict[int, Timer]:
        """New slots, per rate-limited queue with one pacing write and in due order, for a batch's timers
        that come too late for theirs, by index. Anything else (slot-less timers gather in their own
        threads, `repace`) is left to each timer's attempt."""
        now = self.ctx.clock()
        need: dict[str, list[int]] = {}
        for index, timer in enumerate(timers):
            if timer.queue == LATER_NAMESPACE or schedule.is_early(from_ms(timer.due_ms), now):
                continue
            if timer.slot is not None and timer.slot.missed(to_ms(now)):
                need.setdefault(timer.queue, []).append(index)
        repaced: dict[int, Timer] = {}
        for name, indices in need.items():
            try:
                queue = control(name)
                rates = delivery_control.rates(queue)
                if rates is None or queue.paused:
                    continue
                starts = [timers[i].start(timers[i].due_ms) for i in indices]
                slots = self.ctx.pacer.scoped_slots(name, rates, starts, now, lead_ms=REPACE_LEAD_MS)
            except Exception as exc:
                log("batch_pacing_failed", queue=name, error=f"{type(exc).__name__}: {exc}")
                continue
            for index, slot in zip(indices, slots, strict=True):
                repaced[index] = timers[index].in_slot(slot)
            self.ctx.metrics.count("Repaced", len(indices), queue=name)
        return repaced

    def unpaced(self, timer: Timer, rate: Rates | None) -> Timer:
        """A paced timer of a queue that has no rate limit any more: the slot holds the message back no
        longer and the timer targets the message's own due time instead. One whose slot was taken while the
        queue had key rates alone, when it has a queue rate now, loses its slot (which the queue's scope never
        counted): it takes a new one like a timer back from a pause (`repace`), from its old slot's start on."""
        if rate is not None:
            if timer.slot is None or pacing.counted(timer.slot, rate):
                return timer
            self.ctx.metrics.count("Rescoped", queue=timer.queue)
            return replace(timer, latest_ms=None, queue_scoped=True)
        message = self.ctx.store.get_message(timer.queue, timer.id)
        if message is None or message.status is not Status.PENDING or message.version != timer.version:
            return timer  # not written yet, or moved on: its start fails as it would have
        self.ctx.metrics.count("Unpaced", queue=timer.queue)
        return replace(timer, due_ms=to_ms(message.due_at), latest_ms=None)

    def repace(self, timer: Timer, rate: Rates, now: datetime, repaces: int) -> Timer:
        """A new slot for a timer without one (or that missed its own); its message stays pending. Slots
        are never before the timer's due time, which is never before the message's. A slot-less timer
        (back from a pause) first gathers with the others of its queue in this process."""
        gather = functools.partial(self._gather, timer.queue) if timer.slot is None else None
        start = timer.start(timer.due_ms)
        (slot,) = self.ctx.pacer.scoped_slots(timer.queue, rate, [start], now, lead_ms=REPACE_LEAD_MS, gather=gather)
        now = self.ctx.clock()
        self.ctx.metrics.count("Repaced", queue=timer.queue)
        late = None if timer.latest_ms is None else to_ms(now) - timer.latest_ms
        in_ms = slot.start_ms - to_ms(now)
        log("repaced", id=timer.id, queue=timer.queue, late_ms=late, slot_in_ms=in_ms, repaces=repaces)
        return timer.in_slot(slot)

    def may_hold(self, start: datetime, now: datetime, deadline: datetime | None, repaces: int = 0) -> bool:
        """Whether an attempt may wait in this invocation (ending at `deadline`) for a slot at `start`, rather
        than go round the timer queue."""
        room = deadline is None or start + ATTEMPT_BUDGET <= deadline
        return repaces < MAX_REPACES and room and start - now <= REPACE_HOLD

    def _gather(self, queue: str) -> datetime:
        """Waits until the queue's gathering instant (set by the first slot-less timer of a window)."""
        now = self.ctx.clock()
        with self._lock:
            until = self._gathers.get(queue)
            if until is None or now > until:
                until = self._gathers[queue] = now + RESUME_GATHER
        self.ctx.sleep(schedule.seconds_until(until, now))
        return self.ctx.clock()

    def start(
        self,
        timer: Timer,
        message: Message,
        control: DeliveryControl,
        lease_end: datetime,
        deadline: datetime | None,
        paused: Callable[[str], tuple[datetime, bool]],
    ) -> datetime | None:
        """When a begun attempt of a rate-limited queue may start: inside a slot, which it waits for on the
        start board (where an attempt due earlier may take it over and leave its own). A slot missed (the
        begin write ate its tolerance) is replaced by a new one while the attempt still owns the message.
        None (put it back): no near slot fits its lease and invocation (`deadline`), or the queue was
        paused meanwhile (`paused`: the queue's pause state and when the read it comes from was sent)."""
        slot, rate = timer.slot, delivery_control.rates(control)
        assert slot is not None and rate is not None

        def fits(candidate: Slot) -> bool:
            start = from_ms(candidate.start_ms)
            ends = attempt_deadline(start, control.timeout)
            room = deadline is None or ends <= deadline
            within = start - self.ctx.clock() <= REPACE_HOLD
            return room and within and ends + timedelta(seconds=BOOKKEEPING) <= lease_end

        for _ in range(MAX_REPACES):
            now = self.ctx.clock()
            if slot.missed(to_ms(now)):
                # Begun: its message is not pending, so its slot is not recorded as one to give way.
                again = replace(timer.start(timer.due_ms), holder=None)
                (slot,) = self.ctx.pacer.scoped_slots(timer.queue, rate, [again], now, lead_ms=BEGUN_LEAD_MS)
                self.ctx.metrics.count("Repaced", queue=timer.queue)
                log("repaced_begun", id=timer.id, queue=timer.queue, slot_in_ms=slot.start_ms - to_ms(now))
            if not fits(slot):
                return None
            line = board_line(timer, rate)
            waiting = self.board.join(line, to_ms(message.due_at), slot, fits, to_ms(now), message.priority)
            read_at: datetime | None = None
            try:
                while (turn := self.board.start(waiting, to_ms(self.ctx.clock()))) is None:
                    start = from_ms(waiting.slot.start_ms)
                    if read_at is None and self.ctx.clock() >= start - PAUSE_READ_AHEAD:
                        # The pause state read before the begin is too old by the start: read it again
                        # a little ahead, so the read's latency does not eat the slot's window.
                        read_at, stopped = paused(timer.queue)
                        if stopped:
                            return None
                        continue
                    wake = start if read_at is not None else start - PAUSE_READ_AHEAD
                    # In short steps: another attempt joining may move this one's slot earlier.
                    self.ctx.sleep(min(BOARD_POLL_S, schedule.seconds_until(wake, self.ctx.clock())))
            finally:
                self.board.leave(waiting)
            slot = turn
            now = self.ctx.clock()
            if read_at is None or not delivery_control.pause_read_fresh(read_at, now):
                read_at, stopped = paused(timer.queue)
                if stopped:
                    return None
                now = self.ctx.clock()
            if not slot.missed(to_ms(now)):
                return now
        return None
