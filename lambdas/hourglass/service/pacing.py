"""Pacing: start slots from the calendar of a rate-limited queue's windows (one conditional write per window a batch
touches), and the dispatcher's side of it (new slots for late timers, a begun attempt waiting for its slot).

See docs/delivery-control.md ("Rate limit: pacing at hand-off"); the slot rules are `core.pacing`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.adapters.metrics import Metrics
from hourglass.core import delivery_control, holders, pacing, schedule
from hourglass.core.admission import MAX_PRIORITY
from hourglass.core.deadline import ATTEMPT_BUDGET, BOOKKEEPING, attempt_deadline
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.handoff import Timer
from hourglass.core.model import DEFAULT_PRIORITY, LATER_NAMESPACE, Message, Status
from hourglass.core.pacing import Held, Item, PaceState, Rates, Slot, Start
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import StoreError
from hourglass.logs import log


class StorageUsed(storage.Messages, storage.PaceWindows, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


class Context(Protocol):
    """The parts of `service.context.Context` the dispatcher's pacing uses (pacing sits below the context)."""

    @property
    def store(self) -> StorageUsed: ...
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


class _Request:
    """One caller's starts waiting for slots; the thread that writes the pacing items fills in the answer.
    `moving`: slots of a batch about to be dealt out again (`HandOff.in_slot_order`), with their holders: their
    record entries go in the same round of writes, and the request is `aborted` if a higher priority took one."""

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


# Pacing items a process remembers per queue (a cache: a stale one costs a lost round, never the bound).
MAX_KNOWN = 10_000


class Pacer:
    """Allocates slots for one queue's hand-off batches from the calendar of its windows; remembers each window's
    last state so the first try of a warm process needs no read (a lost race returns the winner's value).

    The threads of one process take turns per queue, and the one whose turn it is allocates for every
    request of that queue waiting meanwhile, in due order, with one write per window (a group commit):
    a dispatcher's many missed slots cost one pacing write per window, and the earliest-due of them goes first.
    With flow keys (v1.2) the same rule runs per scope: each key's windows and the queue's
    (`pacing.allocate_scoped`). Each window also records who holds its slots (`core.holders`), in the same write."""

    def __init__(self, store: storage.PaceWindows) -> None:
        self.store = store
        self._known: dict[str, dict[Item, PaceState]] = {}
        self._queue_locks: dict[str, threading.Lock] = {}
        self._waiting: dict[str, list[_Request]] = {}
        self._lock = threading.Lock()
        self.held = HeldSlots()

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
        record entries go in the same round. None (nothing written) when a higher priority took one of them."""
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
        """Slots for every request of `group` (the caller holds the queue's turn): each window that changes is
        written conditionally, with its record of who holds its slots (`core.holders`). A lost write starts a new
        round from the winner's value (with the scope's windows after it read in one Query); the slots this group
        wrote in a lost round are its own to deal again (nobody else was given them), and those it does not deal
        again stay unused (a gap only lowers a rate)."""
        mine: dict[Item, set[int]] = {}
        for _ in range(MAX_ROUNDS):
            for request in group:
                request.aborted = bool(request.moving) and self._taken(queue, rates, request.moving)
            live = [request for request in group if not request.aborted]
            if not live:
                return
            starts = [start for request in live for start in request.starts]
            floor_ms = max(request.floor_ms for request in live)
            allocation = pacing.allocate_scoped(rates, starts, floor_ms, lead_ms=0, known=self._cursor(queue, mine))
            try:
                records = self._records(queue, rates, live, allocation, floor_ms)
                writes = self._writes(queue, allocation.moved, records)
                if writes is not None and self._written(queue, writes, mine):
                    at = 0
                    for request in live:
                        request.slots = allocation.slots[at : at + len(request.starts)]
                        at += len(request.starts)
                    return
            except Exception as exc:  # every waiting request gets it, not only the writer's
                for request in live:
                    request.error = exc if isinstance(exc, StoreError) else StoreError(f"pacing failed: {exc}")
                return
        for request in group:
            request.error = StoreError(f"pacing item of queue {queue} kept changing")

    def _cursor(self, queue: str, mine: dict[Item, set[int]]) -> Callable[[Item], tuple[int, ...] | None]:
        """What the allocation sees of a window: the slots taken, but those the group took in a lost round."""
        known = self._known.setdefault(queue, {})

        def taken(item: Item) -> tuple[int, ...] | None:
            got = known.get(item, PaceState()).taken
            ours = mine.get(item)
            return got if got is None or not ours else tuple(offset for offset in got if offset not in ours)

        return taken

    def _writes(
        self, queue: str, moved: dict[Item, tuple[int, ...]], records: dict[Item, str | None]
    ) -> dict[Item, tuple[tuple[int, ...], str | None]] | None:
        """Each window's new slots and record. A window no fresh slot moves keeps its slots (a re-deal's entries
        leave it, or a slot rounded up to its first millisecond is listed there); None when such a window's state
        was not known: it is read now, and the round is done again."""
        writes = {item: (new, records.get(item, self._state(queue, item).held)) for item, new in moved.items()}
        for item, record in records.items():
            if item not in writes:
                taken = self._state(queue, item).taken
                if taken is None:
                    self.read(queue, item)
                    return None
                writes[item] = (taken, record)
        return writes

    def _written(
        self, queue: str, writes: dict[Item, tuple[tuple[int, ...], str | None]], mine: dict[Item, set[int]]
    ) -> bool:
        """The windows' conditional writes, the latest first (a guard goes before the slot it guards: where the
        slot's write then loses, the guard only leaves a gap), until one loses (the windows after it are read).
        A window already as wanted (the group's own slots of a lost round, dealt again) needs no write. The
        slots each write adds are noted in `mine` (a guard is not: another's may be equal to it)."""
        for item in sorted(writes, key=Item.order, reverse=True):
            before = self._state(queue, item)
            taken, record = writes[item]
            if before.taken == taken and before.held == record:
                continue
            if not self._advance(queue, item, taken, record):
                self._read_ahead(queue, item)
                return False
            added = set(taken) - set(before.taken or ())
            mine.setdefault(item, set()).update(offset for offset in added if offset >= 0)
        return True

    def _records(
        self, queue: str, rates: Rates, live: Sequence[_Request], allocation: pacing.ScopedAllocation, now_ms: int
    ) -> dict[Item, str | None]:
        """The new record of each window written: the starts that name their message version and this process's
        notes of slots it does not list, added as room allows, and the entries of slots dealt out again
        (`_Request.moving`) taken off."""
        added: dict[Item, list[Held]] = {}
        forget: dict[Item, set[str]] = {}
        starts = [start for request in live for start in request.starts]
        for start, slot in zip(starts, allocation.slots, strict=True):
            if holders.listed(start):
                assert start.holder is not None
                held = Held(slot, _held_scope(rates, start.scope), start.priority, *start.holder)
                added.setdefault(_record_item(rates, held), []).append(held)
        for request in live:
            for moving in request.moving:
                forget.setdefault(_record_item(rates, moving), set()).add(moving.id)
        records: dict[Item, str | None] = {}
        noted = self.held.candidates(queue, rates, now_ms + pacing.GIVE_WAY_MARGIN_MS)
        for item in {*added, *forget}:
            old = self._state(queue, item).held
            entries = holders.parse(old, _held_scope(rates, item.scope or ""))
            # This process's notes of slots the record does not list yet (a backlog beyond its room when handed
            # off, whose first slots have passed since) refill it: a note is exact (see `HeldSlots`).
            listed = {held.slot.start_ms for held in entries}
            taking = {held.id for held in added.get(item, [])} | forget.get(item, set())
            added.setdefault(item, []).extend(
                h
                for h in noted
                if _record_item(rates, h) == item and h.slot.start_ms not in listed and h.id not in taking
            )
            taken = allocation.moved.get(item, self._state(queue, item).taken or ())
            room = self.store.held_room(queue, item, taken)
            kept = holders.recorded(entries, added.get(item, []), now_ms, room, forget=forget.get(item, ()))
            new = holders.render(kept)
            if new != old:
                records[item] = new
        return records

    def _taken(self, queue: str, rates: Rates, moving: Sequence[Held]) -> bool:
        by_item: dict[Item, list[Held]] = {}
        for held in moving:
            by_item.setdefault(_record_item(rates, held), []).append(held)
        return any(
            holders.taken(holders.parse(self._state(queue, item).held, _held_scope(rates, item.scope or "")), group)
            for item, group in by_item.items()
        )

    def holders(self, queue: str, rates: Rates, scopes: Iterable[str], first_ms: int, until_ms: int) -> list[Held]:
        """The slots recorded as held in these scopes (flow keys; "" for the queue's own), as last known, in the
        windows that cover `first_ms` to `until_ms` (the only ones a give-way can take from): none read when the
        batch's slots are at their due times, and only those windows looked up otherwise."""
        known = self._known.get(queue, {})
        found: list[Held] = []
        if first_ms >= until_ms:
            return found
        for scope in {_held_scope(rates, scope) for scope in scopes}:
            first = _record_item_at(rates, scope, first_ms * 1000)
            last = _record_item_at(rates, scope, until_ms * 1000)
            for index in range(first.window.index, last.window.index + 1):
                state = known.get(Item(first.scope, pacing.Window(first.window.width_us, index)))
                if state is not None and state.held is not None:
                    found += holders.parse(state.held, scope)
        return found

    def swap(self, queue: str, rates: Rates, victim: Held, taker: Held | None, fresh: Slot) -> Swap:
        """The records' change when `taker` takes `victim`'s slot (`holders.swapped`), in the windows of both
        slots, as a transaction's fences on the records as last known (none when they do not change); `settle`
        it once written, or `refresh` the records when it lost."""
        fresh_held = Held(fresh, victim.scope, victim.priority, victim.id, victim.version)
        items = list(dict.fromkeys([_record_item(rates, victim), _record_item(rates, fresh_held)]))
        before = {item: self._state(queue, item).held for item in items}
        entries = [h for item in items for h in holders.parse(before[item], victim.scope)]
        after_all = holders.swapped(entries, victim, taker, fresh)
        after = {item: holders.render(h for h in after_all if _record_item(rates, h) == item) for item in items}
        changed = {item: (before[item], after[item]) for item in items if before[item] != after[item]}
        fences = [self.store.held_fence(queue, item, old, new) for item, (old, new) in changed.items()]
        return Swap(queue, changed, fences)

    def settle(self, swap: Swap) -> None:
        known = self._known.setdefault(swap.queue, {})
        for item, (_, new) in swap.changes.items():
            known[item] = replace(known.get(item, PaceState()), held=new)

    def refresh(self, swap: Swap) -> bool:
        """The records of a give-way whose fences lost, read again: whether any changed since (else its victim
        moved on)."""
        return any(self.read(swap.queue, item).held != old for item, (old, _) in swap.changes.items())

    def _state(self, queue: str, item: Item) -> PaceState:
        return self._known.get(queue, {}).get(item, PaceState())

    def _remember(self, queue: str, item: Item, state: PaceState) -> None:
        known = self._known.setdefault(queue, {})
        if len(known) >= MAX_KNOWN:
            known.clear()
        known[item] = state

    def read(self, queue: str, item: Item) -> PaceState:
        """One pacing item read consistently, and remembered."""
        state = self.store.pace_state(queue, item)
        self._remember(queue, item, state)
        return state

    def _read_ahead(self, queue: str, item: Item) -> None:
        """What the windows after a lost one hold now (unused ones: none); the lost one's value came with
        the failed write."""
        width, first = item.window.width_us, item.window.index + 1
        held = self.store.pace_windows(queue, item.scope, width, first, WINDOWS_READ_AHEAD)
        for index in range(first, first + WINDOWS_READ_AHEAD):
            self._remember(queue, Item(item.scope, pacing.Window(width, index)), held.get(index, PaceState()))

    def _advance(self, queue: str, item: Item, taken: tuple[int, ...], record: str | None) -> bool:
        """One window's conditional write, on its slots and its record as last known (the writer learns the
        record even when it does not change it, for giving way next); remembers what the item now holds."""
        written, state = self.store.advance_pace(queue, item, self._state(queue, item), taken, record)
        self._remember(queue, item, state)
        return written


@dataclass(frozen=True)
class Swap:
    """A give-way's change of the records of the windows involved (`Pacer.swap`): `fences` make it part of the
    victim's write (none: no record changes, the victim being one this process noted, `HeldSlots`)."""

    queue: str
    changes: dict[Item, tuple[str | None, str | None]]
    fences: list[dict[str, Any]]


def _held_scope(rates: Rates, scope: str) -> str:
    return scope if rates.key is not None else ""


def _record_item_at(rates: Rates, scope: str, at_us: int) -> Item:
    """The pacing item that records who holds a slot starting at `at_us`: the window of its flow key's where keys
    are limited, else of the queue's (a give-way stays within one key)."""
    if rates.key is not None:
        return pacing.item_at(scope, rates.key, at_us)
    assert rates.queue is not None
    return pacing.item_at(None, rates.queue, at_us)


def _record_item(rates: Rates, held: Held) -> Item:
    return _record_item_at(rates, held.scope, held.slot.start_ms * 1000)


def floor_after(store: storage.PaceWindows, queue: str, before: DeliveryControl, after: DeliveryControl) -> int | None:
    """Where a queue's slots start after a PUT from `before` to `after` (`DeliveryControl.pace_floor_us`). When it
    moves them to windows of another width (`pacing.queue_state`) the new ones start after the old ones' last slot,
    read here, so every slot of before and after is a spacing apart. It also tells the dispatcher until when a
    key's attempts may have started outside a key pacing slot, so a PUT adding a key rate to a queue rate sets it
    too (`pacing.key_paced_since`). None once the queue has no rate limit (its slots hold nothing back)."""
    old, new = delivery_control.rates(before), delivery_control.rates(after)
    if new is None:
        return None
    was = pacing.queue_state(old)
    if old is None or old.queue is None or was is None:
        return before.pace_floor_us
    key_added = old.key is None and new.key is not None
    if was == pacing.queue_state(new) and not key_added:
        return before.pace_floor_us
    last = store.last_window(queue, was)
    return _later(None if last is None else last + pacing.pace(old.queue).spacing_us, before.pace_floor_us)


def _later(cursor: int | None, floor: int | None) -> int | None:
    return cursor if floor is None else max(cursor or 0, floor)


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
