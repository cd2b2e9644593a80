"""An attempt's outcome, recorded through `service/transitions`: delivered, retried, failed or expired, put back
before its start, or superseded by another dispatcher that took the message over."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from hourglass.adapters import storage
from hourglass.core import admission, delivery, delivery_control, next_attempt
from hourglass.core.attempts import Attempt, AttemptOutcome
from hourglass.core.model import Message, Queue, RetryPolicy, Status, past_expiry
from hourglass.core.pacing import Rates
from hourglass.errors import StaleVersionError
from hourglass.logs import log
from hourglass.service import circuit_breaker, transitions
from hourglass.service.context import Context

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Attempts


@dataclass(frozen=True)
class Result:
    ok: bool
    outcome: str
    # A failed timer that can do nothing before this instant (a running lease's end): its record is
    # handed out again then, not sooner.
    back_at: datetime | None = None
    # False: the attempt never began (no version of its message is its own), so nothing tells a later
    # attempt that its concurrency slots are free: they are given back (`StartGate`).
    begun: bool = True


class Outcomes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def delivered(
        self,
        message: Message,
        queue: Queue | None,
        started: datetime,
        done: datetime,
        outcome: delivery.Outcome,
        read: transitions.Chained | None = None,
    ) -> Result:
        self.ctx.metrics.lateness((done - message.due_at).total_seconds() * 1000, queue=message.queue)
        attempt = self._record(message, started, done, AttemptOutcome.DELIVERED, outcome)
        circuit_breaker.record(self.ctx, queue, failed=False, now=done)
        return self.end(message, Status.DELIVERED, done, None, attempt, read)

    def failed(
        self,
        message: Message,
        queue: Queue | None,
        outcome: delivery.Outcome,
        started: datetime,
        now: datetime,
        read: transitions.Chained | None = None,
    ) -> Result:
        """A failed attempt: retried while its policy and expiry allow, else failed or expired."""
        policy = message.retry or (queue.settings.retry if queue else RetryPolicy())
        decision = next_attempt.after_failure(
            policy,
            attempt=message.attempts - message.attempts_base,
            retryable=outcome.retryable,
            now=now,
            expires_at=message.expires_at,
            retry_after=outcome.retry_after,
            jitter=random.random(),
            window=admission.window(message, queue),
        )
        attempt = self._record(message, started, now, decision.outcome, outcome, retry_at=decision.retry_at)
        circuit_breaker.record(self.ctx, queue, failed=True, now=now)
        if decision.outcome is AttemptOutcome.FAILED:
            return self.end(message, Status.FAILED, now, outcome.error, attempt, read)
        if decision.outcome is AttemptOutcome.EXPIRED:
            return self.end(message, Status.EXPIRED, now, outcome.error, attempt, read)
        assert decision.retry_at is not None
        return self._retry(message, queue, decision.retry_at, outcome.error, now, read)

    def end(
        self,
        message: Message,
        status: Status,
        now: datetime,
        error: str | None,
        attempt: Attempt | None = None,
        read: transitions.Chained | None = None,
    ) -> Result:
        """The message ends in `status` (`transitions.finish`); `attempt`, the one that ended it, rides on the
        outcome write, and `read` is what was read of its schedule before the attempt."""
        delivered_at = now if status is Status.DELIVERED else None
        try:
            transitions.finish(
                self.ctx, message, status, now, error=error, delivered_at=delivered_at, attempt=attempt, read=read
            )
        except StaleVersionError:
            # Our lease ran out and another dispatcher took over; its outcome stands.
            return self.superseded(message)
        return Result(True, status.value)

    def window_closed(
        self, message: Message, queue: Queue | None, opens: datetime, now: datetime, read: transitions.Chained | None
    ) -> Result:
        """Begun, but its delivery window closed while it waited (for a pacing slot, a resume): pending again, due
        at the next opening, its attempt given back; expired if that is after its expiry."""
        if past_expiry(message.expires_at, opens):
            return self.end(message, Status.EXPIRED, now, "expired before its delivery window opened", read=read)
        rates = delivery_control.rates(delivery_control.of(queue))
        if not transitions.put_back(self.ctx, message, rates, now, due=opens):
            return self.superseded(message)
        self.ctx.metrics.count("WindowDeferred", queue=message.queue)
        return Result(True, "window_closed")

    def put_back(self, message: Message, rate: Rates | None, now: datetime) -> Result:
        """Begun, not started: pending again (attempt count restored) with a new slot and timer."""
        if not transitions.put_back(self.ctx, message, rate, now):
            return self.superseded(message)
        self.ctx.metrics.count("Repaced", queue=message.queue)
        return Result(True, "repaced")

    def superseded(self, message: Message) -> Result:
        """Our lease ran out and another dispatcher took the message over, often from this very SQS
        message received again: acknowledging it could delete the only timer of a message whose new
        holder then dies (stuck `delivering` for good). Kept, it comes back after its visibility
        timeout and is skipped once the message has moved on (or taken over if its holder died)."""
        self.ctx.metrics.count("Superseded", queue=message.queue)
        return Result(False, "superseded")

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
        instead (`end`): a message delivered at once pays no write for its history."""
        attempt = Attempt(
            message.id,
            message.attempts,
            started,
            finished,
            result,
            outcome.status_code,
            outcome.error,
            retry_at,
            outcome.response,
        )
        if result is AttemptOutcome.RETRY:
            self.ctx.store.put_attempt(message.queue, attempt)
        return attempt

    def _retry(
        self,
        message: Message,
        queue: Queue | None,
        retry_at: datetime,
        error: str | None,
        now: datetime,
        read: transitions.Chained | None,
    ) -> Result:
        rate = delivery_control.rates(delivery_control.of(queue))
        if not transitions.retry(self.ctx, message, retry_at, error, rate, now, read):
            return self.superseded(message)
        self.ctx.metrics.count("Retried", queue=message.queue)
        log("retry_scheduled", id=message.id, queue=message.queue, attempt=message.attempts, error=error)
        return Result(True, "retry")
