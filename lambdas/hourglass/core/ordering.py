"""Ordered delivery per key (v1.3): who of a key's messages may start, who waits, who is woken when a head ends.

A key's state is one small item (`adapters.ordering_storage`): its head (the message that may start or has
started), whether a failed head holds the key, and the earliest due messages waiting behind it, in due order;
the later ones of a long line wait in overflow items, one each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from hourglass.core.model import Message, Ordering, Status
from hourglass.core.timestamps import to_ms

# A message that took a free key starts this long before its due time at the latest, once it has looked at its key
# again (`yield_to_earlier`): a message due before it has reached its own start by then.
SETTLE_LEAD = timedelta(milliseconds=50)
# A message that waits behind its key's head is woken by the head's end (a timer with no delay); its own
# timer comes back only this late (seconds, one SQS delay), in case that wake was lost to a crash.
WAIT_SAFETY_DELAY = 900
# The waiters a key's item holds, the earliest of its line: ~60 bytes each, so the item stays under 1 KB (one write
# unit) with the longest queue name and flow key. Later ones wait in overflow items, brought back into the item
# when fewer than half of these remain.
INLINE = 12


@dataclass(frozen=True, order=True)
class Waiter:
    """A due message waiting for its turn: ordered by the time it was scheduled for, then its creation."""

    due_ms: int
    created_ms: int
    id: str

    @classmethod
    def of(cls, message: Message) -> Waiter:
        return cls(to_ms(message.scheduled), to_ms(message.created_at), message.id)

    def encode(self) -> str:
        return f"{self.due_ms}#{self.created_ms}"


@dataclass(frozen=True)
class Spilled:
    """A waiter's overflow item as stored; `ref` names the placement (a waiter placed again is another item)."""

    waiter: Waiter
    ref: str


@dataclass(frozen=True)
class KeyState:
    """One key's order as stored; `version` 0: no item (an idle key costs nothing). `waiting`: the line's
    earliest, at most INLINE; with `overflow`, more wait in overflow items, every one after the last of these."""

    head: str | None = None
    held: bool = False
    waiting: tuple[Waiter, ...] = ()
    version: int = 0
    overflow: bool = False

    @property
    def idle(self) -> bool:
        return self.head is None and not self.held and not self.waiting and not self.overflow

    def waiter(self, message_id: str) -> Waiter | None:
        return next((w for w in self.waiting if w.id == message_id), None)


@dataclass(frozen=True)
class Turn:
    """What a key's state becomes (`state`; unchanged: no write), whether the message starts, whom to wake; the
    waiters to put in overflow items before the key's write (`spill`), the overflow items to delete after it
    (`drop`), and a message that left the line whose overflow items, if any, go too (`left`)."""

    state: KeyState
    starts: bool
    woken: str | None = None
    changed: bool = True
    spill: tuple[Waiter, ...] = ()
    drop: tuple[Spilled, ...] = ()
    left: Waiter | None = None


def key_of(message: Message) -> str:
    """Messages without a flow key share the key ""."""
    return message.flow_key or ""


def orders(ordering: Ordering | None) -> bool:
    return ordering is not None


def take(state: KeyState, me: Waiter, queued: tuple[Spilled, ...] = ()) -> Turn:
    """A due message at its start: it starts when it is the head, or the key is free and no waiter is due
    before it; otherwise it waits in due order (and wakes the earliest waiter if the key was left free).
    `queued`: its own overflow items (a waiter in overflow seen again changes nothing)."""
    if state.head == me.id:
        return Turn(state, True, changed=False)
    others = tuple(w for w in state.waiting if w.id != me.id)
    if state.head is None and not state.held:
        # The inline waiters are the line's earliest: the first of them and `me` is the first of all.
        first = min((*others, me))
        if first == me:
            return Turn(replace(state, head=me.id, waiting=others), True, drop=queued)
        rest = tuple(w for w in others if w != first)
        return _join(replace(state, head=first.id, waiting=rest), me, queued, woken=first.id)
    if state.waiter(me.id) == me or (queued and _after_inline(state, me)):
        return Turn(state, False, changed=False)
    return _join(replace(state, waiting=others), me, queued)


def _after_inline(state: KeyState, me: Waiter) -> bool:
    return state.overflow and (not state.waiting or state.waiting[-1] < me)


def _join(state: KeyState, me: Waiter, queued: tuple[Spilled, ...], woken: str | None = None) -> Turn:
    """`me` takes its place in line: after every inline waiter of a key with overflow, in an overflow item (the
    key's item is written all the same, so that a refill under way reads again); else inline, the last one
    moved to an overflow item when that makes more than INLINE."""
    if _after_inline(state, me):
        return Turn(state, False, woken, spill=() if queued else (me,))
    waiting = tuple(sorted((*state.waiting, me)))
    spill = waiting[INLINE:]
    state = replace(state, waiting=waiting[:INLINE], overflow=state.overflow or bool(spill))
    return Turn(state, False, woken, spill=spill, drop=queued)


def yield_to_earlier(state: KeyState, me: Waiter) -> Turn | None:
    """The head `me`, not started yet, looks again just before its start: a message due before it that reached
    its start just after it took the free key (two due moments apart reach their dispatchers in either order)
    goes first, and `me` waits in line; None when none did."""
    if state.head != me.id or state.held or not state.waiting or not state.waiting[0] < me:
        return None
    first, *rest = state.waiting
    return _join(replace(state, head=first.id, waiting=tuple(rest)), me, (), woken=first.id)


def ended(
    state: KeyState, message_id: str, status: Status, ordering: Ordering | None, waiter: Waiter | None = None
) -> Turn:
    """A message of the key ended: a waiter leaves the line; the head hands the key to the earliest waiter,
    or keeps it held when it failed on a queue whose ordering holds on failure. `waiter`: the message's place
    in line, whose overflow items go (a key with overflow)."""
    if state.head != message_id:
        return _leaves(state, message_id, waiter)
    if status is Status.FAILED and ordering is not None and ordering.on_failure == "hold":
        return Turn(replace(state, held=True), False, changed=not state.held)
    return _next(replace(state, held=False))


def stepped_back(state: KeyState, message_id: str, waiter: Waiter | None = None) -> Turn:
    """A message rescheduled before it started: it leaves its place (head or line) and takes a new one when
    it is due again."""
    if state.head != message_id or state.held:
        return _leaves(state, message_id, waiter)
    return _next(state)


def _leaves(state: KeyState, message_id: str, waiter: Waiter | None) -> Turn:
    waiting = tuple(w for w in state.waiting if w.id != message_id)
    left = waiter if state.overflow else None
    return Turn(replace(state, waiting=waiting), False, changed=waiting != state.waiting, left=left)


def release(state: KeyState) -> Turn | None:
    """`POST .../keys/{flow_key}/release`: the held key goes on with its next message; None: nothing held."""
    if not state.held:
        return None
    return _next(replace(state, held=False))


def _next(state: KeyState) -> Turn:
    if not state.waiting:
        return Turn(replace(state, head=None), False)
    first, *rest = state.waiting
    return Turn(replace(state, head=first.id, waiting=tuple(rest)), False, woken=first.id)


def needs_refill(turn: Turn) -> bool:
    """Whether a change leaves fewer than half of INLINE waiters in the key's item while others wait in
    overflow: the earliest of those are moved in with it (`refill`)."""
    return turn.changed and turn.state.overflow and len(turn.state.waiting) < max(1, INLINE // 2)


def refill(turn: Turn, found: tuple[Spilled, ...], complete: bool) -> Turn:
    """`turn` with the earliest overflow waiters moved into the key's item, up to INLINE. `found`: the first
    overflow items in due order; `complete`: they are all of them. The waiters `turn` was to spill count as
    overflow ones. The moved items are dropped (after the key's write), and so are items of a message already
    inline or head and second items of one message."""
    state = turn.state
    present = {w.id for w in state.waiting} | {state.head}
    fresh: dict[str, Spilled] = {}
    stale = []
    for entry in found:
        if entry.waiter.id in present or entry.waiter.id in fresh:
            stale.append(entry)
        else:
            fresh[entry.waiter.id] = entry
    candidates = sorted((*(e.waiter for e in fresh.values()), *(w for w in turn.spill if w.id not in fresh)))
    if not complete and found:
        # Overflow items not read may sort before a spilled waiter after the last one read.
        candidates = [c for c in candidates if c <= found[-1].waiter]
    moved = {w.id for w in candidates[: INLINE - len(state.waiting)]}
    waiting = tuple(sorted((*state.waiting, *(w for w in candidates if w.id in moved))))
    state = replace(state, waiting=waiting, overflow=not (complete and len(moved) == len(candidates)))
    spill = tuple(w for w in turn.spill if w.id not in moved)
    drop = (*turn.drop, *stale, *(e for e in fresh.values() if e.waiter.id in moved))
    turn = replace(turn, state=state, spill=spill, drop=drop)
    if state.head is None and not state.held and waiting:
        # A key handed on with no inline waiter left (not stored so, but tolerated): the first moved one has it.
        turn = replace(turn, state=replace(state, head=waiting[0].id, waiting=waiting[1:]), woken=waiting[0].id)
    return turn


def blocked_by(state: KeyState, message: Message, now: datetime) -> str | None:
    """Who a pending message waits behind: for one in line or due, its key's head (or, the head just handed
    on, the waiter ahead of it); None for the head, or one not due yet."""
    if message.status is not Status.PENDING or state.head == message.id:
        return None
    if state.waiter(message.id) is None and message.due_at > now:
        return None
    if state.head is not None:
        return state.head
    ahead = [w for w in state.waiting if w < Waiter.of(message) and w.id != message.id]
    return ahead[0].id if ahead else None


def head_ended(state: KeyState, head: Message | None) -> bool:
    """Whether a head's message is over although the key still names it (a writer died between its end and
    the key's write): no item, or a finished one; `ended` then does what its end should have. A held key
    stays held."""
    return not state.held and (head is None or head.status.finished)


def key_doc(flow_key: str, state: KeyState, overflowed: int = 0) -> dict[str, object]:
    """`GET /v1/queues/{queue}/keys/{flow_key}`; `overflowed`: the waiters in overflow items."""
    waiting = len(state.waiting) + overflowed
    return {"flow_key": flow_key, "head": state.head, "waiting": waiting, "held": state.held}
