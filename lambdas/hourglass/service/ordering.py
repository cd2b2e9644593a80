"""Ordered delivery per key (v1.3): a due message's turn at its start, the key handed on when its head ends, steps
back or is released, and a woken message's timer sent at once (a waiting key costs no polling). A long line's later
waiters go to overflow items and come back into the key's item as it empties."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from hourglass.adapters import storage
from hourglass.core import delivery_control, ordering
from hourglass.core.handoff import Scheduled, Timer
from hourglass.core.model import Message, Ordering, Queue, Status
from hourglass.core.ordering import KeyState, Spilled, Turn, Waiter
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service.context import Context


class StorageUsed(storage.KeyOrders, storage.Messages, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


# Read-and-write rounds on one key before giving up (each lost round is one failed conditional write): a burst of a
# key's messages in several processes at once, each round won by one.
TRIES = 20


def take_turn(ctx: Context, message: Message, rule: Ordering, now: datetime) -> Turn:
    """At a due message's start: whether it is its key's turn (it is then the head); if not, it waits in line.
    A head whose message ended without handing the key on yet (its end's key write is under way, or its writer
    died between the two writes) is ended here, and the message the key goes to woken."""
    me = Waiter.of(message)
    flow_key = ordering.key_of(message)

    def step(state: KeyState) -> Turn:
        # A waiter in overflow seen again (its timer back after WAIT_SAFETY_DELAY) finds its item: one read.
        inline = state.head == me.id or state.waiter(me.id) is not None
        queued = () if inline or not state.overflow else tuple(ctx.store.overflowed(message.queue, flow_key, me))
        if state.head not in (None, message.id) and not state.held:
            assert state.head is not None
            head = ctx.store.get_message(message.queue, state.head)
            if ordering.head_ended(state, head):
                status = Status.CANCELLED if head is None else head.status
                healed = ordering.ended(state, state.head, status, rule)
                turn = ordering.take(healed.state, me, queued)
                # The message the heal handed the key to is woken, unless this one took it.
                woken = turn.woken or (healed.woken if healed.woken == turn.state.head != me.id else None)
                return replace(turn, woken=woken, changed=True)
        return ordering.take(state, me, queued)

    turn = _change(ctx, message.queue, flow_key, step)
    assert turn is not None
    if turn.woken is not None:
        wake(ctx, message.queue, flow_key, turn.woken, now)
    return turn


def settle(ctx: Context, message: Message, now: datetime) -> bool:
    """A message that took a free key looks at it again just before its start (`ordering.yield_to_earlier`):
    True when it still starts; False when it gave the key to a message due before it and waits in line."""
    me = Waiter.of(message)
    turn = _change(ctx, message.queue, ordering.key_of(message), lambda state: ordering.yield_to_earlier(state, me))
    if turn is None:
        return True
    if turn.woken is not None:
        wake(ctx, message.queue, ordering.key_of(message), turn.woken, now)
    return False


def after_end(ctx: Context, message: Message, rule: Ordering | None, now: datetime) -> None:
    """A message of an ordered queue ended: out of its key's line, or, the head, the key goes on (or is held)."""
    if rule is None:
        return
    me = Waiter.of(message)
    _step(ctx, message, now, lambda state: ordering.ended(state, message.id, message.status, rule, me))


def after_reschedule(ctx: Context, before: Message, rule: Ordering | None, now: datetime) -> None:
    """A pending message rescheduled before its first attempt leaves its place; a retry keeps it."""
    if rule is None or before.status is not Status.PENDING or before.attempts > before.attempts_base:
        return
    _step(ctx, before, now, lambda state: ordering.stepped_back(state, before.id, Waiter.of(before)))


def release(ctx: Context, queue: str, flow_key: str, now: datetime) -> KeyState | None:
    """`POST .../keys/{flow_key}/release`: the key's state after, None when nothing was held."""
    turn = _change(ctx, queue, flow_key, ordering.release)
    if turn is None:
        return None
    if turn.woken is not None:
        wake(ctx, queue, flow_key, turn.woken, now)
    return turn.state


def _step(ctx: Context, message: Message, now: datetime, step: Callable[[KeyState], Turn]) -> None:
    try:
        turn = _change(ctx, message.queue, ordering.key_of(message), lambda s: None if s.idle else step(s))
    except StoreError as exc:
        # The key still names the ended head: the next message of the key to arrive ends it (`take_turn`).
        log("key_order_failed", id=message.id, queue=message.queue, error=str(exc))
        return
    if turn is not None and turn.woken is not None:
        wake(ctx, message.queue, ordering.key_of(message), turn.woken, now)


def wake(ctx: Context, queue: str, flow_key: str, message_id: str, now: datetime) -> None:
    """The message the key was handed to starts now: its timer is sent with no delay (its own comes back only
    after `ordering.WAIT_SAFETY_DELAY`). One that is no longer pending hands the key on in turn."""
    for _ in range(TRIES):
        message = ctx.store.get_message(queue, message_id)
        if message is not None and message.status is Status.PENDING:
            timer = Timer(
                queue,
                message.id,
                message.version,
                to_ms(message.due_at),
                to_ms(now),
                key=message.flow_key,
                priority=message.priority,
            )
            ctx.handoff.resend([Scheduled(timer, 0)])
            return
        turn = _change(ctx, queue, flow_key, functools.partial(_skip, message_id=message_id))
        if turn is None or turn.woken is None:
            return
        message_id = turn.woken


def _skip(state: KeyState, message_id: str) -> Turn | None:
    return None if state.head != message_id else ordering.ended(state, message_id, Status.CANCELLED, None)


def _change(ctx: Context, queue: str, flow_key: str, step: Callable[[KeyState], Turn | None]) -> Turn | None:
    """One change of a key, read then written on the version read; read again when another writer won. Overflow
    items are put before the key's write (a refill under way then reads them, or this write loses and reads
    again), and deleted after it."""
    placed: list[Spilled] = []
    for _ in range(TRIES):
        read = ctx.store.key_order(queue, flow_key)
        turn = step(read)
        if turn is None:
            return None
        if ordering.needs_refill(turn):
            found, complete = ctx.store.overflow(queue, flow_key, limit=2 * ordering.INLINE)
            turn = ordering.refill(turn, tuple(found), complete)
        spilled = ctx.store.spill(queue, flow_key, turn.spill) if turn.spill else []
        placed += spilled
        if not turn.changed or ctx.store.save_key_order(queue, flow_key, turn.state, read):
            _tidy(ctx, queue, flow_key, turn, [p for p in placed if p not in spilled])
            return turn
    raise StoreError(f"key {flow_key!r} of {queue} kept changing")


def _tidy(ctx: Context, queue: str, flow_key: str, turn: Turn, lost: list[Spilled]) -> None:
    """After a key's write: the overflow items it moved inline or found stale go, and so do those of a message
    that left the line, and those this change put in a round it lost that its last round placed otherwise."""
    kept = {turn.state.head, *(w.id for w in turn.state.waiting), *(w.id for w in turn.spill)}
    drop = [*turn.drop, *(p for p in lost if p.waiter.id in kept)]
    if turn.left is not None:
        drop += ctx.store.overflowed(queue, flow_key, turn.left)
    if drop:
        ctx.store.unspill(queue, flow_key, drop)


def unordered(ctx: Context, queue: str, now: datetime) -> int:
    """A PUT removed the queue's ordering: every waiting message starts as any other now (its timer sent at
    once) and the keys' items go, overflow items too. Returns how many were woken."""
    woken = 0
    for flow_key, state in ctx.store.key_orders(queue):
        spilled = ctx.store.overflow(queue, flow_key)[0] if state.overflow else []
        for message_id in dict.fromkeys([*(w.id for w in state.waiting), *(e.waiter.id for e in spilled)]):
            wake(ctx, queue, flow_key, message_id, now)
            woken += 1
        _change(ctx, queue, flow_key, lambda s: None if s.idle else Turn(KeyState(), False))
        if spilled:
            ctx.store.unspill(queue, flow_key, spilled)
    return woken


def key_doc(ctx: Context, queue: str, flow_key: str, state: KeyState) -> dict[str, object]:
    """`GET .../keys/{flow_key}`: the waiters in overflow items counted too (a read of them all)."""
    if not state.overflow:
        return ordering.key_doc(flow_key, state)
    present = {state.head, *(w.id for w in state.waiting)}
    spilled = {e.waiter.id for e in ctx.store.overflow(queue, flow_key)[0]} - present
    return ordering.key_doc(flow_key, state, len(spilled))


def blocked(ctx: Context, queue: Queue | None, messages: Sequence[Message], now: datetime) -> dict[str, str]:
    """`blocked_by` of each due pending message of an ordered queue that waits behind another (one read per key)."""
    if queue is None or delivery_control.of(queue).ordering is None:
        return {}
    due = [m for m in messages if m.status is Status.PENDING]
    states = {key: ctx.store.key_order(queue.name, key) for key in {ordering.key_of(m) for m in due}}
    found = {m.id: ordering.blocked_by(states[ordering.key_of(m)], m, now) for m in due}
    return {message_id: head for message_id, head in found.items() if head is not None}
