"""Whether a timer's attempt starts now: not before its due time, not past the invocation's deadline, not while its
queue is paused, only inside a pacing slot and with a concurrency slot. Otherwise its timer goes back to the timer
queue and its message stays pending."""

from __future__ import annotations

import functools
import math
import random
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

from hourglass.adapters import storage
from hourglass.core import concurrency, deadline, delivery_control, handoff, schedule
from hourglass.core.concurrency import Lease
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.handoff import Scheduled, Timer
from hourglass.core.model import LATER_NAMESPACE, Ordering, Queue, Status
from hourglass.core.ordering import SETTLE_LEAD, WAIT_SAFETY_DELAY
from hourglass.core.pacing import Rates, Slot, counted, key_paced_since
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import ordering
from hourglass.service.context import Context
from hourglass.service.dispatch.arrivals import ArrivalBoard
from hourglass.service.dispatch.attempt import Attempts
from hourglass.service.dispatch.outcome import Result
from hourglass.service.pacing import REPACE_HOLD, PacedStarts


class StorageUsed(storage.Queues, storage.Messages, storage.ConcurrencySlots, storage.KeyOrders, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


# The attempt starts (pending -> delivering, one conditional write) this long before the due time,
# so the write's latency is not added to the delivery's lateness; the delivery waits for the due time.
BEGIN_LEAD = timedelta(milliseconds=250)
# An occurrence chained at its hand-off is known before its begin: it begins one round trip sooner, for the
# read of its schedule between the begin and the delivery (transitions.Chained).
OCCURRENCE_BEGIN_LEAD = 2 * BEGIN_LEAD
# ... but not sooner than this after the timer was sent: a hand-off timer is sent before its item is
# written, and starting before the write lands costs a failed write and a re-send.
WRITE_GRACE = timedelta(seconds=1)
# A paced attempt (rate-limited queue) begins as soon as its timer arrives, up to this long before its
# slot: a begin write slowed by load then still lands inside the slot's window, and the pause state
# is read again just before the start (delivery_control.PAUSE_READ_MAX_AGE).
PACED_BEGIN_LEAD = timedelta(seconds=2)
# Any instant: a lease length does not depend on when it starts.
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# How old a cached queue (and its pause flag) may be when an attempt starts (delivery_control).
QUEUE_MAX_AGE = delivery_control.PAUSE_READ_MAX_AGE


class _Read:
    """A strongly consistent read of a queue under way, sent at `sent`: the starts that need the queue meanwhile
    wait for it rather than send their own."""

    def __init__(self, sent: datetime) -> None:
        self.sent = sent
        self.done = threading.Event()
        self.queue: Queue | None = None
        self.ok = False


class QueueReads:
    """The queues a batch's attempts start on, each from a strongly consistent read at most QUEUE_MAX_AGE old
    (its age counted from before the read was sent), so a start never relies on an older pause state. A batch
    starts with none: a queue deleted before it is seen as deleted, never a cached answer of an earlier one.

    One read of a queue at a time: the starts that find none fresh while one is under way wait for it (every
    start reads the queue, so with a slow read each would send its own: a read per start on one hot item, and
    more load the slower reads get)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._read: dict[str, tuple[datetime, Queue | None]] = {}
        self._reading: dict[str, _Read] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._read = {}
            self._reading = {}

    def get(self, name: str) -> Queue | None:
        if name == LATER_NAMESPACE:
            return None
        sent = self.ctx.clock()
        with self._lock:
            cached = self._read.get(name)
            if cached and delivery_control.pause_read_fresh(cached[0], sent):
                return cached[1]
            under_way = self._reading.get(name)
            if under_way is None:
                mine = self._reading[name] = _Read(sent)
        if under_way is None:
            return self._send(name, mine)
        under_way.done.wait()
        if under_way.ok and delivery_control.pause_read_fresh(under_way.sent, self.ctx.clock()):
            return under_way.queue
        # Failed, or too old by the time it came (a very slow read): this start reads for itself.
        return self._send(name, _Read(self.ctx.clock()))

    def _send(self, name: str, read: _Read) -> Queue | None:
        """The read, kept for the batch unless a clear() came meanwhile (it is then older than the batch)."""
        try:
            read.queue = self.ctx.store.get_queue(name, consistent=True)
            read.ok = True
        finally:
            with self._lock:
                if self._reading.get(name) is read:
                    del self._reading[name]
                    if read.ok:
                        self._read[name] = (read.sent, read.queue)
            read.done.set()
        return read.queue

    def control(self, name: str) -> DeliveryControl:
        return delivery_control.of(self.get(name))

    def paused(self, name: str) -> tuple[datetime, bool]:
        """The queue's pause state and when the read it comes from was sent (a cached one may be older)."""
        paused = self.control(name).paused
        with self._lock:
            cached = self._read.get(name)
        return (cached[0] if cached else self.ctx.clock() - delivery_control.PAUSE_READ_MAX_AGE), paused


class StartGate:
    def __init__(
        self,
        ctx: Context,
        queues: QueueReads,
        pacing: PacedStarts,
        attempts: Attempts,
        arrivals: ArrivalBoard | None = None,
    ) -> None:
        self.ctx = ctx
        self.arrivals = arrivals or ArrivalBoard()
        self.queues = queues
        self.pacing = pacing
        self.attempts = attempts
        # The end of the invocation under way: no attempt starts that could not finish before it.
        self.deadline: datetime | None = None

    def process(self, timer: Timer, repaces: int = 0) -> Result:
        now = self.ctx.clock()
        due = from_ms(timer.due_ms)
        if repaces and schedule.is_early(due, now) and self.pacing.may_hold(due, now, self.deadline):
            # Re-paced here: wait for the slot in this dispatcher rather than round the timer queue.
            self.ctx.sleep(schedule.seconds_until(due - timedelta(seconds=schedule.TIMER_HEAD_START), now))
            now = self.ctx.clock()
        if timer.slot is not None:
            timer = self.pacing.unpaced(timer, delivery_control.rates(self.queues.control(timer.queue)))
            due = from_ms(timer.due_ms)
        if schedule.is_early(due, now):
            self.ctx.handoff.resend([handoff.resend(timer, now)])
            return Result(True, "redelayed")
        lead = OCCURRENCE_BEGIN_LEAD if timer.chained else BEGIN_LEAD
        if timer.latest_ms is not None:
            lead = PACED_BEGIN_LEAD
        start = min(due, max(due - lead, from_ms(timer.sent_ms) + WRITE_GRACE))
        if self.deadline is not None and max(start, due) + deadline.ATTEMPT_BUDGET > self.deadline:
            # Killed mid-attempt, it would be taken over only when its lease ends: send it again now.
            return self._deferred(timer, now)
        self.ctx.sleep(schedule.seconds_until(start, now))
        queue = self.queues.get(timer.queue)
        control = delivery_control.of(queue)
        now = self.ctx.clock()
        if self.deadline is not None and deadline.attempt_deadline(max(now, due), control.timeout) > self.deadline:
            # The queue's timeout would outlast the invocation: send the timer again rather than be killed.
            return self._deferred(timer, now)
        if control.paused:
            # No attempt starts while paused: the message stays pending and keeps its due time. The
            # timer comes back without its slot: after the resume it takes a new one with the others.
            self.ctx.handoff.resend([Scheduled(replace(timer, latest_ms=None), delivery_control.PAUSE_RECHECK)])
            self.ctx.metrics.count("Paused", queue=timer.queue)
            return Result(True, "paused")
        if control.ordering is not None:
            if not self._turn(timer, control.ordering):
                return Result(True, "waiting")
            now = self.ctx.clock()
        rates = delivery_control.rates(control)
        if rates is not None and (timer.slot is None or timer.slot.missed(to_ms(now))):
            # A rate-limited queue's attempt starts only inside a pacing slot: take a new one.
            return self._repace(timer, rates, now, repaces)
        if timer.latest_ms is not None and due - BEGIN_LEAD > now and control.limits_concurrency:
            # A paced attempt asks for its concurrency slot just before its start, not when it arrives early for
            # its slot: asked then, it could take the slot ahead of the attempt one spacing before it, which would
            # be refused and re-paced behind later slots (priority and due order lost, throughput halved).
            self.ctx.sleep(schedule.seconds_until(due - BEGIN_LEAD, now))
            now = self.ctx.clock()
        # The lease allows for a begin at most BEGIN_TO_START ahead of the start; a paced one may be earlier,
        # and may wait in this dispatcher for a new slot after its begin (`PacedStarts.start`).
        ahead = due - now - timedelta(seconds=deadline.BEGIN_TO_START)
        lease = self._lease(control.timeout) + max(timedelta(0), ahead)
        if rates is not None:
            lease += REPACE_HOLD
        home = (queue.slot_layout, to_ms(queue.created_at)) if queue is not None else (1, 0)
        held = self._acquire(timer, control, to_ms(now + lease), to_ms(now), home)
        if held is None:
            return self._busy(timer)
        try:
            stopped = functools.partial(self._stopped, timer.slot)
            result = self.attempts.run(timer, queue, control, now, lease, self.deadline, stopped)
        except BaseException:
            # Crashed in-process, its request over: give the slots back rather than wait for their lease.
            self._release(timer.queue, held)
            raise
        if not result.begun:
            self._release(timer.queue, held)
        # A begun attempt's outcome (or put-back) is a new version of its message, which frees its slots
        # (`concurrency.attempt_ended`): no release write.
        return result

    def _acquire(
        self, timer: Timer, control: DeliveryControl, until: int, now_ms: int, home: tuple[int, int] = (1, 0)
    ) -> list[Lease] | None:
        """The concurrency slots the attempt needs, its key's first, then the queue's (v1.2: every limit at
        once), where the queue keeps them (`home`: its slot layout and life); None, with any taken given back,
        when one is refused."""
        holder = concurrency.holder(timer.id, timer.version)
        key_limit, lease_ms = control.key_max_concurrency, until - now_ms
        # The key's rate alone keeps it under the limit (no slot write) once every attempt a lease can still hold
        # started in a key pacing slot: none paced before the key rate was added is left.
        paced = key_paced_since(control.pace_floor_us, now_ms - lease_ms)
        if key_limit is not None and paced and not concurrency.binds(key_limit, control.key_rate_limit, lease_ms / 1e3):
            key_limit = None
        needed = [(key_limit, timer.scope), (control.max_concurrency, None)]
        held: list[Lease] = []
        for limit, flow_key in needed:
            if limit is None:
                continue
            got = self.ctx.store.acquire_slot(timer.queue, limit, holder, until, now_ms, timer.waits, flow_key, *home)
            if got is None:
                self._release(timer.queue, held)
                return None
            held.append(got)
        return held

    def _turn(self, timer: Timer, rule: Ordering) -> bool:
        """Whether it is the message's turn in its key (v1.3); if not, it waits in line, woken by the end of the
        message before it, and its timer comes back only in case that wake is lost. A version that is not this
        pending one (a takeover of the head, a stale timer) is left to the begin."""
        if self.ctx.store.key_order(timer.queue, timer.scope).head == timer.id:
            # Woken, retried, put back or taken over: the head's turn, with no write; decided, so the later ones of
            # its key in this process go on to their line now, not after its attempt.
            self.arrivals.left(timer)
            return True
        message = self.ctx.store.get_message(timer.queue, timer.id)
        if message is None or message.status is not Status.PENDING or message.version != timer.version:
            return True
        # The ones of its key due before it, received by this process, have their turn first.
        self.arrivals.wait_for_earlier(timer)
        turn = ordering.take_turn(self.ctx, message, rule, self.ctx.clock())
        self.arrivals.left(timer)
        if turn.starts and turn.changed:
            # It took a free key: one due just before it may reach its start a moment later, and goes first.
            self.ctx.sleep(schedule.seconds_until(message.due_at - SETTLE_LEAD, self.ctx.clock()))
            if ordering.settle(self.ctx, message, self.ctx.clock()):
                return True
        elif turn.starts:
            return True
        self.ctx.handoff.resend([Scheduled(replace(timer, latest_ms=None), WAIT_SAFETY_DELAY)])
        self.ctx.metrics.count("Waiting", queue=timer.queue)
        return False

    def _stopped(self, slot: Slot | None, name: str) -> tuple[datetime, bool]:
        """The queue's pause state and when its read was sent (`QueueReads.paused`); stopped as well when a PUT
        since the gate gave the queue a rate that `slot` does not count in: put back, it takes a new slot."""
        read_at, paused = self.queues.paused(name)
        rates = delivery_control.rates(self.queues.control(name))
        return read_at, paused or (slot is not None and not counted(slot, rates))

    def _deferred(self, timer: Timer, now: datetime) -> Result:
        self.ctx.handoff.resend([handoff.resend(timer, now)])
        self.ctx.metrics.count("Deferred", queue=timer.queue)
        return Result(True, "deferred")

    def _lease(self, timeout: float) -> timedelta:
        """How long an attempt owns its message and its concurrency slot (the same instant for both).

        The configured lease is sized for the default timeout (and kept short where the local runtime
        polls with a short visibility); a queue with a longer timeout extends it past its attempt and
        bookkeeping, so a live attempt is never taken over.
        """
        lease = self.ctx.settings.delivery_lease
        if timeout > delivery_control.DEFAULT_TIMEOUT:
            lease = max(lease, (deadline.delivery_lease(EPOCH, timeout) - EPOCH).total_seconds())
        return timedelta(seconds=lease)

    def _repace(self, timer: Timer, rate: Rates, now: datetime, repaces: int) -> Result:
        """A new pacing slot for a timer without one (or that missed its own); the message stays pending.
        A near slot is waited for here; a far one, or a timer re-paced too often, goes back to SQS."""
        paced = self.pacing.repace(timer, rate, now, repaces)
        now, start = self.ctx.clock(), from_ms(paced.due_ms)
        if not self.pacing.may_hold(start, now, self.deadline, repaces):
            self.ctx.handoff.resend([handoff.resend(paced, now)])
            return Result(True, "repaced")
        # Held: woken as a timer from the queue would be (its head start before the slot), then the
        # usual path (pause read, deadline, begin) runs again.
        self.ctx.sleep(schedule.seconds_until(start - timedelta(seconds=schedule.TIMER_HEAD_START), now))
        return self.process(paced, repaces=repaces + 1)

    def _busy(self, timer: Timer) -> Result:
        """Every probed concurrency slot is held: the message stays pending, its timer comes back later."""
        wait = concurrency.busy_wait(timer.waits, random.random(), timer.priority)
        self.ctx.handoff.resend([Scheduled(replace(timer, waits=timer.waits + 1), math.ceil(wait))])
        self.ctx.metrics.count("Busy", queue=timer.queue)
        return Result(True, "busy")

    def _release(self, queue: str, held: list[Lease]) -> None:
        for lease in held:
            try:
                self.ctx.store.release_slot(queue, lease)
            except StoreError as exc:
                # The slot frees itself when its lease (the message's) runs out.
                log("slot_release_failed", queue=queue, slot=lease.slot, error=str(exc))
