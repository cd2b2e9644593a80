"""The timer DLQ's consumer: a message whose timer was dead-lettered ends `failed` with a reason."""

from __future__ import annotations

from hourglass.adapters import storage
from hourglass.adapters.timer_queue import read_timers
from hourglass.core.handoff import Timer
from hourglass.core.model import Status
from hourglass.errors import StaleVersionError, StoreError, ValidationError
from hourglass.logs import log
from hourglass.service import transitions
from hourglass.service.context import Context

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Messages


class DeadLetters:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def run_batch(self, records: list[tuple[str, str, int]]) -> list[str]:
        """(record id, body, receive count) of dead-lettered timer records; returns the ids to retry."""
        failed: list[str] = []
        for record_id, body, receives in records:
            try:
                timers = read_timers(body)
            except ValidationError as exc:
                # Names no message: logged whole (bounded) for the operator, then acknowledged.
                log("poison_dead_letter", error=str(exc), receives=receives, body=body[:1000])
                self.ctx.metrics.count("Poison")
                continue
            for timer in timers:
                # Every timer that reached the DLQ, whatever its message turns out to be (an alarm reads it:
                # this consumer empties the DLQ at once, so its depth hardly ever shows one).
                self.ctx.metrics.count("DeadLetterTimers", queue=timer.queue)
                try:
                    done = self._fail(timer, receives)
                except StoreError as exc:
                    log("dead_letter_failed", id=timer.id, queue=timer.queue, error=str(exc))
                    done = False
                if not done:
                    failed.append(record_id)
                    break
        return failed

    def _fail(self, timer: Timer, receives: int) -> bool:
        """Fails the timer's message if it is still the version the timer was for, or stuck delivering.

        False while an attempt holds a live lease: the record is looked at again later.
        """
        message = self.ctx.store.get_message(timer.queue, timer.id)
        if message is None:
            return True
        now = self.ctx.clock()
        pending_here = message.status is Status.PENDING and message.version == timer.version
        delivering = message.status is Status.DELIVERING
        if delivering and message.claimed_until is not None and message.claimed_until > now:
            return False
        if not (pending_here or delivering):
            # Moved on (delivered, cancelled, rescheduled with a timer of its own): nothing is stuck.
            return True
        reason = f"timer dead-lettered after {receives} receives"
        try:
            # Ends as any failed message does: notice, history TTL, the schedule's next occurrence.
            transitions.finish(self.ctx, message, Status.FAILED, now, error=reason)
        except StaleVersionError:
            return True
        self.ctx.metrics.count("TimerDeadLettered", queue=message.queue)
        if delivering:
            # Stuck past its lease for all the timer's receives: the worst case the StuckDelivering alarm sees.
            self.ctx.metrics.count("StuckDelivering", queue=message.queue)
        log("dead_lettered", id=message.id, queue=message.queue, receives=receives)
        return True
