"""The dispatch: re-checks a due message, waits out the last second, delivers, records the outcome."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from hourglass.adapters.timer_queue import read_timers
from hourglass.core import (
    concurrency,
    deadline,
    delivery,
    delivery_control,
    epoch,
    handoff,
    lifecycle,
    next_attempt,
    schedule,
)
from hourglass.core.attempts import Attempt, AttemptOutcome
from hourglass.core.concurrency import Lease
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.handoff import Scheduled, Timer
from hourglass.core.model import (
    LATER_NAMESPACE,
    Message,
    Queue,
    RetryPolicy,
    Status,
)
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import DeliveryError, StaleVersionError, StoreError, TimerQueueError, ValidationError
from hourglass.logs import log
from hourglass.service import targets, transitions
from hourglass.service.context import Context
from hourglass.service.heartbeat import Heartbeat
from hourglass.service.pacing import REPACE_HOLD, PacedStarts

# A timer can beat the ingest write it belongs to (the timer is sent first); give the write time.
MISSING_GRACE = timedelta(seconds=60)
# Such a timer is looked at again after as long as it has waited so far (1 s at least, this at most):
# far sooner than the queue's visibility timeout, and an orphan timer costs a handful of resends.
MISSING_RETRY_MAX = 15
# Timers of one invocation handled at once: most of each one's time is the sleep until it is due.
DISPATCH_THREADS = 32
# The attempt starts (pending -> delivering, one conditional write) this long before the due time,
# so the write's latency is not added to the delivery's lateness; the delivery waits for the due time.
BEGIN_LEAD = timedelta(milliseconds=250)
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


@dataclass(frozen=True)
class Result:
    ok: bool
    outcome: str
    # A failed timer that can do nothing before this instant (a running lease's end): its record is
    # handed out again then, not sooner.
    back_at: datetime | None = None


class Dispatcher:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self._queues: dict[str, tuple[datetime, Queue | None]] = {}
        self._queues_lock = threading.Lock()
        self.pacing = PacedStarts(ctx)
        self.deadline: datetime | None = None

    def run_batch(
        self,
        bodies: list[tuple[str, str]],
        deadline: datetime | None = None,
        receipts: Mapping[str, str] | None = None,
        receives: Mapping[str, int] | None = None,
    ) -> list[str]:
        """Processes (record id, body) pairs, every timer of every pack concurrently, earliest due first.

        Returns the ids of the records with a timer that failed: SQS redelivers the whole record and
        the timers that did succeed are then skipped (their version has moved on). No attempt starts
        that could not finish before `deadline` (the invocation's end): its timer is sent again.
        With the records' `receipts` (record id -> receipt handle, as Lambda's event has them), they
        stay hidden only while the batch works (service.heartbeat).
        """
        with Heartbeat(self.ctx.timers, receipts or {}, self.ctx.settings.timer_hold, self.ctx.clock) as held:
            failed, back_at, poison = self._run_batch(bodies, deadline)
        # A poison record never succeeds: it goes on to the DLQ without a backoff.
        errors = [record for record in failed if record not in back_at and record not in poison]
        held.release(
            {record: at for record, at in back_at.items() if record in failed},
            {record: (receives or {}).get(record, 1) for record in errors},
        )
        return failed

    def _run_batch(
        self, bodies: list[tuple[str, str]], deadline: datetime | None
    ) -> tuple[list[str], dict[str, datetime], set[str]]:
        """The failed records, when those whose every failed timer waits for an instant come back, and the
        records that could not be read (poison)."""
        # Queues are read once per batch, strongly consistently: a queue deleted before the batch
        # started is seen as deleted (never a cached answer from an earlier invocation).
        self._queues = {}
        self.deadline = deadline
        failed: set[str] = set()
        poison: set[str] = set()
        waits: dict[str, datetime] = {}
        work: list[tuple[str, Timer]] = []
        for record_id, body in bodies:
            try:
                work.extend((record_id, timer) for timer in read_timers(body))
            except ValidationError as exc:
                failed.add(record_id)
                poison.add(record_id)
                self._poison(exc)
        work.sort(key=lambda pair: pair[1].due_ms)
        repaced = self.pacing.repace_batch([timer for _, timer in work], self._control)
        work = [(record, repaced.get(index, timer)) for index, (record, timer) in enumerate(work)]
        if work:
            # Every timer on a thread of its own: the longest attempt (up to the queue's 120 s timeout)
            # bounds the invocation, which `deadline.function_timeout` sizes the function for.
            with ThreadPoolExecutor(max_workers=max(DISPATCH_THREADS, len(work))) as pool:
                results = list(pool.map(lambda i: self.process_timer(work[i][1], int(i in repaced)), range(len(work))))
            failed.update(record_id for (record_id, _), result in zip(work, results, strict=True) if not result.ok)
            waits = _waits(work, results)
        return list(dict.fromkeys(record_id for record_id, _ in bodies if record_id in failed)), waits, poison

    def _poison(self, exc: ValidationError) -> Result:
        log("poison_timer", error=str(exc))
        self.ctx.metrics.count("Poison")
        return Result(False, "poison")

    def _control(self, name: str) -> DeliveryControl:
        return delivery_control.of(self._queue(name))

    def process_timer(self, timer: Timer, repaces: int = 0) -> Result:
        """One timer; no exception escapes, so nothing raised for one message fails its batch-mates."""
        try:
            return self._process(timer, repaces=repaces)
        except (StoreError, DeliveryError, TimerQueueError) as exc:
            # Transient: the timer comes back (SQS redelivers its record) and the attempt is retried.
            log("dispatch_failed", id=timer.id, queue=timer.queue, error=str(exc))
            return Result(False, "error")
        except Exception as exc:
            log("dispatch_crashed", id=timer.id, queue=timer.queue, error=f"{type(exc).__name__}: {exc}")
            self.ctx.metrics.count("DispatchError", queue=timer.queue)
            return Result(False, "error")

    def _process(self, timer: Timer, *, repaces: int = 0) -> Result:
        now = self.ctx.clock()
        due = from_ms(timer.due_ms)
        if repaces and schedule.is_early(due, now) and self.pacing.may_hold(due, now, self.deadline):
            # Re-paced here: wait for the slot in this dispatcher rather than round the timer queue.
            self.ctx.sleep(schedule.seconds_until(due - timedelta(seconds=schedule.TIMER_HEAD_START), now))
            now = self.ctx.clock()
        if timer.slot is not None:
            timer = self.pacing.unpaced(timer, self._control(timer.queue).rate_limit)
            due = from_ms(timer.due_ms)
        if schedule.is_early(due, now):
            self.ctx.handoff.resend([handoff.resend(timer, now)])
            return Result(True, "redelayed")
        lead = BEGIN_LEAD if timer.latest_ms is None else PACED_BEGIN_LEAD
        start = min(due, max(due - lead, from_ms(timer.sent_ms) + WRITE_GRACE))
        if self.deadline is not None and max(start, due) + deadline.ATTEMPT_BUDGET > self.deadline:
            # Killed mid-attempt, it would be taken over only when its lease ends: send it again now.
            self.ctx.handoff.resend([handoff.resend(timer, now)])
            self.ctx.metrics.count("Deferred", queue=timer.queue)
            return Result(True, "deferred")
        self.ctx.sleep(schedule.seconds_until(start, now))
        queue = self._queue(timer.queue)
        control = delivery_control.of(queue)
        now = self.ctx.clock()
        if self.deadline is not None and deadline.attempt_deadline(max(now, due), control.timeout) > self.deadline:
            # The queue's timeout would outlast the invocation: send the timer again rather than be killed.
            self.ctx.handoff.resend([handoff.resend(timer, now)])
            self.ctx.metrics.count("Deferred", queue=timer.queue)
            return Result(True, "deferred")
        if control.paused:
            # No attempt starts while paused: the message stays pending and keeps its due time. The
            # timer comes back without its slot: after the resume it takes a new one with the others.
            self.ctx.handoff.resend([Scheduled(replace(timer, latest_ms=None), delivery_control.PAUSE_RECHECK)])
            self.ctx.metrics.count("Paused", queue=timer.queue)
            return Result(True, "paused")
        if control.rate_limit is not None and (timer.slot is None or timer.slot.missed(to_ms(now))):
            # A rate-limited queue's attempt starts only inside a pacing slot: take a new one.
            return self._repace(timer, control.rate_limit, now, repaces)
        # The lease allows for a begin at most BEGIN_TO_START ahead of the start; a paced one may be earlier,
        # and may wait in this dispatcher for a new slot after its begin (`PacedStarts.start`).
        ahead = due - now - timedelta(seconds=deadline.BEGIN_TO_START)
        lease = self._lease(control.timeout) + max(timedelta(0), ahead)
        if control.rate_limit is not None:
            lease += REPACE_HOLD
        held = None
        if control.max_concurrency is not None:
            holder = concurrency.holder(timer.id, timer.version)
            until, now_ms = to_ms(now + lease), to_ms(now)
            held = self.store.acquire_slot(timer.queue, control.max_concurrency, holder, until, now_ms, timer.waits)
            if held is None:
                return self._busy(timer)
        try:
            return self._attempt(timer, queue, control, now, lease)
        finally:
            if held is not None:
                self._release(timer.queue, held)

    def _attempt(
        self, timer: Timer, queue: Queue | None, control: DeliveryControl, now: datetime, lease: timedelta
    ) -> Result:
        """Begin, wait for the due time (or slot), deliver, record; the caller holds any concurrency slot."""
        due = from_ms(timer.due_ms)
        lease_end = now + lease
        try:
            message = self._begin(timer, now, lease)
        except StaleVersionError:
            return self._not_startable(timer, now)
        if message.queue != LATER_NAMESPACE and not epoch.belongs(queue, message.queue_epoch):
            return self._finish(message, Status.CANCELLED, now, "queue deleted")
        current = self._schedule(message, queue) if queue is not None else None
        if message.schedule is not None and queue is not None and not message.redelivered and current is None:
            return self._finish(message, Status.CANCELLED, now, "schedule deleted, replaced or paused")
        if timer.slot is not None and control.rate_limit is not None:
            paced_start = self.pacing.start(timer, message, control, lease_end, self.deadline, self._paused)
            if paced_start is None:
                return self._put_back(message, control.rate_limit, self.ctx.clock())
            now = paced_start
        else:
            self.ctx.sleep(schedule.seconds_until(due, self.ctx.clock()))
            now = self.ctx.clock()
        if message.expires_at is not None and now > message.expires_at:
            return self._finish(message, Status.EXPIRED, now, "expired before delivery", read=current)
        started = self.ctx.clock()
        try:
            outcome = targets.deliver(self.ctx, message, queue)
        except (UnicodeError, ValueError, TypeError, LookupError) as exc:
            # An encoding or data error: the next attempt would raise it again. Anything else (a crash)
            # escapes to _handle, which leaves the timer to SQS and the lease to a takeover.
            outcome = delivery.Outcome(
                False, retryable=False, error=f"internal error: {type(exc).__name__}: {exc}"[:500]
            )
        done = self.ctx.clock()
        if outcome.delivered:
            self.ctx.metrics.lateness((done - message.due_at).total_seconds() * 1000, queue=message.queue)
            attempt = self._record(message, started, done, AttemptOutcome.DELIVERED, outcome)
            return self._finish(
                message, Status.DELIVERED, done, None, delivered_at=done, attempt=attempt, read=current
            )
        return self._after_failure(message, queue, outcome, started, done, current)

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

    def _repace(self, timer: Timer, rate: float, now: datetime, repaces: int) -> Result:
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
        return self._process(paced, repaces=repaces + 1)

    def _paused(self, name: str) -> tuple[datetime, bool]:
        """The queue's pause state and when the read it comes from was sent (a cached one may be older)."""
        paused = delivery_control.of(self._queue(name)).paused
        with self._queues_lock:
            cached = self._queues.get(name)
        return (cached[0] if cached else self.ctx.clock() - delivery_control.PAUSE_READ_MAX_AGE), paused

    def _superseded(self, message: Message) -> Result:
        """Our lease ran out and another dispatcher took the message over, often from this very SQS
        message received again: acknowledging it could delete the only timer of a message whose new
        holder then dies (stuck `delivering` for good). Kept, it comes back after its visibility
        timeout and is skipped once the message has moved on (or taken over if its holder died)."""
        self.ctx.metrics.count("Superseded", queue=message.queue)
        return Result(False, "superseded")

    def _busy(self, timer: Timer) -> Result:
        """Every probed concurrency slot is held: the message stays pending, its timer comes back later."""
        wait = concurrency.busy_wait(timer.waits, random.random())
        self.ctx.handoff.resend([Scheduled(replace(timer, waits=timer.waits + 1), math.ceil(wait))])
        self.ctx.metrics.count("Busy", queue=timer.queue)
        return Result(True, "busy")

    def _release(self, queue: str, held: Lease) -> None:
        try:
            self.store.release_slot(queue, held)
        except StoreError as exc:
            # The slot frees itself when its lease (the message's) runs out.
            log("slot_release_failed", queue=queue, slot=held.slot, error=str(exc))

    def _put_back(self, message: Message, rate: float, now: datetime) -> Result:
        """Begun, not started: pending again (attempt count restored) with a new slot and timer."""
        if not transitions.put_back(self.ctx, message, rate, now):
            return self._superseded(message)
        self.ctx.metrics.count("Repaced", queue=message.queue)
        return Result(True, "repaced")

    def _begin(self, timer: Timer, now: datetime, lease: timedelta) -> Message:
        """pending(v) -> delivering, or take over a delivering message whose lease ran out.

        One conditional write either way (a failed one costs a write unit too). A timer's version is
        always a pending one, so the new version is v + 1 exactly when the start was from pending(v);
        a takeover of delivering(w) gives w + 1, and w > v.
        """
        start = lifecycle.begin_delivery(timer.version, now, lease)
        message = self.store.begin_delivery(timer.queue, timer.id, start)
        if message.version != timer.version + 1:
            # The dispatcher that held the lease died; it may have reached the target first. The message
            # sat in `delivering` past its lease until now: operators see it (the StuckDelivering alarm).
            self.ctx.metrics.count("Redelivered", queue=message.queue)
            self.ctx.metrics.count("StuckDelivering", queue=message.queue)
            log("taken_over", id=message.id, queue=message.queue, attempt=message.attempts)
        return message

    def _schedule(self, message: Message, queue: Queue) -> transitions.Chained | None:
        """The schedule an occurrence about to be delivered belongs to, read once: None if it is stale
        (deleted, replaced or paused). A redelivered one is delivered whatever its schedule became. Its
        next occurrence is stored after the outcome (`transitions.chain`), off the delivery's path."""
        if message.schedule is None or message.redelivered:
            return None
        current = self.store.get_schedule(message.queue, message.schedule)
        if current is None or not transitions.is_current(current, message):
            return None
        return transitions.Chained(current, queue)

    def _not_startable(self, timer: Timer, now: datetime) -> Result:
        current = self.store.get_message(timer.queue, timer.id)
        # Not written yet, or written just after the failed start (which now would succeed).
        unwritten = current is None and now - from_ms(timer.sent_ms) < MISSING_GRACE
        if unwritten or (current is not None and current.status is Status.PENDING and current.version == timer.version):
            # The first send time stays in the timer, so the grace still counts from it.
            waited = (now - from_ms(timer.sent_ms)).total_seconds()
            self.ctx.handoff.resend([Scheduled(timer, int(min(MISSING_RETRY_MAX, max(1, waited))))])
            return Result(True, "not_yet_written")
        if current is not None and current.status is Status.DELIVERING:
            # Leased by an attempt under way. Acknowledging would lose the message if that
            # dispatcher dies and its own timer came back before the lease ran out; kept, the timer
            # comes back when the lease ends, to take over from a dispatcher that died.
            return Result(False, "in_flight", back_at=current.claimed_until)
        self.ctx.metrics.count("Skipped", queue=timer.queue)
        return Result(True, "skipped")

    def _queue(self, name: str) -> Queue | None:
        """The queue from a strongly consistent read at most QUEUE_MAX_AGE old (its age counted from
        before the read was sent), so a start never relies on a pause state older than that."""
        if name == LATER_NAMESPACE:
            return None
        sent = self.ctx.clock()
        with self._queues_lock:
            cached = self._queues.get(name)
        if cached and delivery_control.pause_read_fresh(cached[0], sent):
            return cached[1]
        queue = self.store.get_queue(name, consistent=True)
        with self._queues_lock:
            self._queues[name] = (sent, queue)
        return queue

    def _after_failure(
        self,
        message: Message,
        queue: Queue | None,
        outcome: delivery.Outcome,
        started: datetime,
        now: datetime,
        current: transitions.Chained | None = None,
    ) -> Result:
        policy = message.retry or (queue.settings.retry if queue else RetryPolicy())
        decision = next_attempt.after_failure(
            policy,
            attempt=message.attempts - message.attempts_base,
            retryable=outcome.retryable,
            now=now,
            expires_at=message.expires_at,
            retry_after=outcome.retry_after,
            jitter=random.random(),
        )
        attempt = self._record(message, started, now, decision.outcome, outcome, retry_at=decision.retry_at)
        if decision.outcome is AttemptOutcome.FAILED:
            return self._finish(message, Status.FAILED, now, outcome.error, attempt=attempt, read=current)
        if decision.outcome is AttemptOutcome.EXPIRED:
            return self._finish(message, Status.EXPIRED, now, outcome.error, attempt=attempt, read=current)
        assert decision.retry_at is not None
        return self._schedule_retry(message, queue, decision.retry_at, outcome.error, now, current)

    def _record(
        self,
        message: Message,
        started: datetime,
        finished: datetime,
        result: AttemptOutcome,
        outcome: delivery.Outcome,
        retry_at: datetime | None = None,
    ) -> Attempt:
        """A history item for an attempt the message outlives, written before the outcome write (the
        attempt happened either way). The attempt that ends the message rides on its outcome write
        instead (`_finish`): a message delivered at once pays no write for its history."""
        attempt = Attempt(
            message.id, message.attempts, started, finished, result, outcome.status_code, outcome.error, retry_at
        )
        if result is AttemptOutcome.RETRY:
            self.store.put_attempt(message.queue, attempt)
        return attempt

    def _schedule_retry(
        self,
        message: Message,
        queue: Queue | None,
        retry_at: datetime,
        error: str | None,
        now: datetime,
        current: transitions.Chained | None = None,
    ) -> Result:
        rate = delivery_control.of(queue).rate_limit
        if not transitions.retry(self.ctx, message, retry_at, error, rate, now, current):
            return self._superseded(message)
        self.ctx.metrics.count("Retried", queue=message.queue)
        log("retry_scheduled", id=message.id, queue=message.queue, attempt=message.attempts, error=error)
        return Result(True, "retry")

    def _finish(
        self,
        message: Message,
        status: Status,
        now: datetime,
        error: str | None,
        delivered_at: datetime | None = None,
        attempt: Attempt | None = None,
        read: transitions.Chained | None = None,
    ) -> Result:
        try:
            transitions.finish(
                self.ctx,
                message,
                status,
                now,
                error=error,
                delivered_at=delivered_at,
                attempt=attempt,
                read=read,
            )
        except StaleVersionError:
            # Our lease ran out and another dispatcher took over; its outcome stands.
            return self._superseded(message)
        return Result(True, status.value)


def _waits(work: list[tuple[str, Timer]], results: list[Result]) -> dict[str, datetime]:
    """Per failed record, the earliest instant its failed timers wait for; none when one of them may
    try again at once (an error)."""
    waits: dict[str, list[datetime]] = {}
    at_once: set[str] = set()
    for (record_id, _), result in zip(work, results, strict=True):
        if result.ok:
            continue
        if result.back_at is None:
            at_once.add(record_id)
        else:
            waits.setdefault(record_id, []).append(result.back_at)
    return {record: min(ats) for record, ats in waits.items() if record not in at_once}
