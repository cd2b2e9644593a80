"""One attempt: the begin (pending -> delivering, one conditional write), the checks a begun message passes (its
queue's lifetime, its schedule), the wait for its due time or pacing slot, the delivery, and its outcome."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from hourglass.adapters import storage
from hourglass.core import admission, catch_up, delivery, delivery_control, epoch, lifecycle, schedule
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.handoff import Scheduled, Timer
from hourglass.core.model import LATER_NAMESPACE, Message, Queue, Status, past_expiry
from hourglass.core.timestamps import from_ms
from hourglass.errors import StaleVersionError
from hourglass.logs import log
from hourglass.service import targets, transitions
from hourglass.service.context import Context
from hourglass.service.dispatch.outcome import Outcomes, Result
from hourglass.service.pacing import PacedStarts


class StorageUsed(storage.Messages, storage.MessageChanges, storage.Schedules, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


# A timer can beat the ingest write it belongs to (the timer is sent first); give the write time.
MISSING_GRACE = timedelta(seconds=60)
# Such a timer is looked at again after as long as it has waited so far (1 s at least, this at most):
# far sooner than the queue's visibility timeout, and an orphan timer costs a handful of resends.
MISSING_RETRY_MAX = 15


class Attempts:
    def __init__(self, ctx: Context, pacing: PacedStarts, outcomes: Outcomes) -> None:
        self.ctx = ctx
        self.pacing = pacing
        self.outcomes = outcomes

    def run(
        self,
        timer: Timer,
        queue: Queue | None,
        control: DeliveryControl,
        now: datetime,
        lease: timedelta,
        deadline: datetime | None,
        paused: Callable[[str], tuple[datetime, bool]],
    ) -> Result:
        """Begin, wait for the due time (or slot), deliver, record; the caller holds any concurrency slot.
        `deadline`: the invocation's end; `paused`: a fresh read of a queue's pause state (`QueueReads`)."""
        due = from_ms(timer.due_ms)
        lease_end = now + lease
        try:
            message = self._begin(timer, now, lease)
        except StaleVersionError:
            return self._not_startable(timer, now)
        if message.queue != LATER_NAMESPACE and not epoch.belongs(queue, message.queue_epoch):
            return self.outcomes.end(message, Status.CANCELLED, now, "queue deleted")
        current = self._schedule(message, queue, timer.chained) if queue is not None else None
        if message.schedule is not None and queue is not None and not message.redelivered and current is None:
            return self.outcomes.end(message, Status.CANCELLED, now, "schedule deleted, replaced or paused")
        if current is not None and self._missed(message, current, now):
            policy = current.schedule.recurrence.catch_up.value
            return self.outcomes.end(message, Status.CANCELLED, now, f"missed (catch_up {policy})", read=current)
        rates = delivery_control.rates(control)
        if control.flow_control is not None and (timer.key, timer.priority) != (message.flow_key, message.priority):
            # A timer that does not know its message's key (sent before the due index carried it): it would
            # count against another key's limits. Put back unstarted, it is handed off again with them.
            return self.outcomes.put_back(message, rates, self.ctx.clock())
        if timer.slot is not None and rates is not None:
            paced_start = self.pacing.start(timer, message, control, lease_end, deadline, paused)
            if paced_start is None:
                return self.outcomes.put_back(message, rates, self.ctx.clock())
            now = paced_start
        else:
            self.ctx.sleep(schedule.seconds_until(due, self.ctx.clock()))
            now = self.ctx.clock()
        if past_expiry(message.expires_at, now):
            return self.outcomes.end(message, Status.EXPIRED, now, "expired before delivery", read=current)
        opens = admission.opening(message, queue, now)
        if opens > now:
            # Its window closed while it waited (a pacing slot, a pause, an edited window): not delivered now.
            return self.outcomes.window_closed(message, queue, opens, now, current)
        started = self.ctx.clock()
        try:
            outcome = targets.deliver(self.ctx, message, queue)
        except (UnicodeError, ValueError, TypeError, LookupError) as exc:
            # An encoding or data error: the next attempt would raise it again. Anything else (a crash)
            # escapes to the batch, which leaves the timer to SQS and the lease to a takeover.
            outcome = delivery.Outcome(False, retryable=False, error=f"internal error: {type(exc).__name__}: {exc}")
        done = self.ctx.clock()
        if outcome.delivered:
            return self.outcomes.delivered(message, queue, started, done, outcome, current)
        return self.outcomes.failed(message, queue, outcome, started, done, current)

    def _begin(self, timer: Timer, now: datetime, lease: timedelta) -> Message:
        """pending(v) -> delivering, or take over a delivering message whose lease ran out.

        One conditional write either way (a failed one costs a write unit too). A timer's version is
        always a pending one, so the new version is v + 1 exactly when the start was from pending(v);
        a takeover of delivering(w) gives w + 1, and w > v.
        """
        start = lifecycle.begin_delivery(timer.version, now, lease)
        message = self.ctx.store.begin_delivery(timer.queue, timer.id, start)
        if message.version != timer.version + 1:
            # The dispatcher that held the lease died; it may have reached the target first. The message
            # sat in `delivering` past its lease until now: operators see it (the StuckDelivering alarm).
            self.ctx.metrics.count("Redelivered", queue=message.queue)
            self.ctx.metrics.count("StuckDelivering", queue=message.queue)
            log("taken_over", id=message.id, queue=message.queue, attempt=message.attempts)
        return message

    def _schedule(self, message: Message, queue: Queue, chained: bool) -> transitions.Chained | None:
        """The schedule an occurrence about to be delivered belongs to, read once: None if it is stale
        (deleted, replaced or paused). A redelivered one is delivered whatever its schedule became. Its
        next occurrence was stored at its hand-off (`chained`) or is stored after the outcome
        (`transitions.chain`), off the delivery's path either way."""
        if message.schedule is None or message.redelivered:
            return None
        current = self.ctx.store.get_schedule(message.queue, message.schedule)
        if current is None or not transitions.is_current(current, message):
            return None
        return transitions.Chained(current, queue, stored=chained)

    @staticmethod
    def _missed(message: Message, current: transitions.Chained, now: datetime) -> bool:
        """An occurrence reached for the first time after its successor was due (held by a paused queue, or
        Hourglass down) that its schedule's catch-up policy does not deliver; its chaining picks the next."""
        first = message.attempts - message.attempts_base <= 1
        at = message.occurrence_at
        window = admission.window(message, current.queue)
        return first and at is not None and not catch_up.delivers(current.schedule, at, now, window)

    def _not_startable(self, timer: Timer, now: datetime) -> Result:
        current = self.ctx.store.get_message(timer.queue, timer.id)
        # Not written yet, or written just after the failed start (which now would succeed).
        unwritten = current is None and now - from_ms(timer.sent_ms) < MISSING_GRACE
        if unwritten or (current is not None and current.status is Status.PENDING and current.version == timer.version):
            # The first send time stays in the timer, so the grace still counts from it.
            waited = (now - from_ms(timer.sent_ms)).total_seconds()
            self.ctx.handoff.resend([Scheduled(timer, int(min(MISSING_RETRY_MAX, max(1, waited))))])
            return Result(True, "not_yet_written", begun=False)
        if current is not None and current.status is Status.DELIVERING:
            # Leased by an attempt under way. Acknowledging would lose the message if that
            # dispatcher dies and its own timer came back before the lease ran out; kept, the timer
            # comes back when the lease ends, to take over from a dispatcher that died.
            return Result(False, "in_flight", back_at=current.claimed_until, begun=False)
        self.ctx.metrics.count("Skipped", queue=timer.queue)
        return Result(True, "skipped", begun=False)
