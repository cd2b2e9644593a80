"""Ordered delivery per key (v1.3): who of a key's messages may start, who waits, who is woken when a head ends.

A key's state is one small item (`adapters.ordering_storage`): its head (the message that may start or has
started), whether a failed head holds the key, and the due messages waiting behind it, in due order.
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
class KeyState:
    """One key's order as stored; `version` 0: no item (an idle key costs nothing)."""

    head: str | None = None
    held: bool = False
    waiting: tuple[Waiter, ...] = ()
    version: int = 0

    @property
    def idle(self) -> bool:
        return self.head is None and not self.held and not self.waiting

    def waiter(self, message_id: str) -> Waiter | None:
        return next((w for w in self.waiting if w.id == message_id), None)


@dataclass(frozen=True)
class Turn:
    """What a key's state becomes (`state`; unchanged: no write), whether the message starts, whom to wake."""

    state: KeyState
    starts: bool
    woken: str | None = None
    changed: bool = True


def key_of(message: Message) -> str:
    """Messages without a flow key share the key ""."""
    return message.flow_key or ""


def orders(ordering: Ordering | None) -> bool:
    return ordering is not None


def take(state: KeyState, me: Waiter) -> Turn:
    """A due message at its start: it starts when it is the head, or the key is free and no waiter is due
    before it; otherwise it waits in due order (and wakes the earliest waiter if the key was left free)."""
    if state.head == me.id:
        return Turn(state, True, changed=False)
    others = tuple(w for w in state.waiting if w.id != me.id)
    if state.head is None and not state.held:
        first = min((*others, me))
        if first == me:
            return Turn(replace(state, head=me.id, waiting=others), True)
        rest = tuple(sorted(w for w in (*others, me) if w != first))
        return Turn(replace(state, head=first.id, waiting=rest), False, woken=first.id)
    if state.waiter(me.id) == me:
        return Turn(state, False, changed=False)
    return Turn(replace(state, waiting=tuple(sorted((*others, me)))), False)


def yield_to_earlier(state: KeyState, me: Waiter) -> Turn | None:
    """The head `me`, not started yet, looks again just before its start: a message due before it that reached
    its start just after it took the free key (two due moments apart reach their dispatchers in either order)
    goes first, and `me` waits in line; None when none did."""
    if state.head != me.id or state.held or not state.waiting or not state.waiting[0] < me:
        return None
    first, *rest = state.waiting
    return Turn(replace(state, head=first.id, waiting=tuple(sorted((*rest, me)))), False, woken=first.id)


def ended(state: KeyState, message_id: str, status: Status, ordering: Ordering | None) -> Turn:
    """A message of the key ended: a waiter leaves the line; the head hands the key to the earliest waiter,
    or keeps it held when it failed on a queue whose ordering holds on failure."""
    if state.head != message_id:
        waiting = tuple(w for w in state.waiting if w.id != message_id)
        return Turn(replace(state, waiting=waiting), False, changed=waiting != state.waiting)
    if status is Status.FAILED and ordering is not None and ordering.on_failure == "hold":
        return Turn(replace(state, held=True), False, changed=not state.held)
    return _next(replace(state, held=False))


def stepped_back(state: KeyState, message_id: str) -> Turn:
    """A message rescheduled before it started: it leaves its place (head or line) and takes a new one when
    it is due again."""
    if state.head != message_id or state.held:
        waiting = tuple(w for w in state.waiting if w.id != message_id)
        return Turn(replace(state, waiting=waiting), False, changed=waiting != state.waiting)
    return _next(state)


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


def key_doc(flow_key: str, state: KeyState) -> dict[str, object]:
    """`GET /v1/queues/{queue}/keys/{flow_key}`."""
    return {"flow_key": flow_key, "head": state.head, "waiting": len(state.waiting), "held": state.held}
