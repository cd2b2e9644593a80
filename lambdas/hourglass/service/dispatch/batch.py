"""A batch of timer records: read, the timers that missed their slots re-paced together, each timer on a thread of
its own through the start gate; which records failed, and when they are handed out again (`service.heartbeat`)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from hourglass.adapters import storage
from hourglass.adapters.message_storage import CountBatch
from hourglass.adapters.timer_queue import SEND_BACK_SECONDS, pack_to_json, read_timers
from hourglass.core.handoff import Timer
from hourglass.errors import DeliveryError, NewerFormatError, StoreError, TimerQueueError, ValidationError
from hourglass.logs import log
from hourglass.service import circuit_breaker
from hourglass.service.context import Context
from hourglass.service.dispatch.arrivals import ArrivalBoard
from hourglass.service.dispatch.attempt import Attempts
from hourglass.service.dispatch.outcome import Outcomes, Result
from hourglass.service.dispatch.start_gate import QueueReads, StartGate
from hourglass.service.heartbeat import Heartbeat
from hourglass.service.pacing import PacedStarts

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Counters

# Timers of one invocation handled at once: most of each one's time is the sleep until it is due.
DISPATCH_THREADS = 32


class Dispatcher:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queues = QueueReads(ctx)
        self.pacing = PacedStarts(ctx)
        self.arrivals = ArrivalBoard()
        attempts = Attempts(ctx, self.pacing, Outcomes(ctx))
        self.gate = StartGate(ctx, self.queues, self.pacing, attempts, self.arrivals)

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
        # The batch's status changes are counted together: one counter write per queue, not two per message.
        with (
            self.ctx.store.counts_batched() as counted,
            Heartbeat(self.ctx.timers, receipts or {}, self.ctx.settings.timer_hold, self.ctx.clock) as held,
        ):
            failed, back_at, poison = self._run_batch(bodies, deadline, counted)
        # A poison record never succeeds: it goes on to the DLQ without a backoff.
        errors = [record for record in failed if record not in back_at and record not in poison]
        held.release(
            {record: at for record, at in back_at.items() if record in failed},
            {record: (receives or {}).get(record, 1) for record in errors},
        )
        return failed

    def _run_batch(
        self, bodies: list[tuple[str, str]], deadline: datetime | None, counted: CountBatch
    ) -> tuple[list[str], dict[str, datetime], set[str]]:
        """The failed records, when those whose every failed timer waits for an instant come back, and the
        records that could not be read (poison)."""
        self.queues.clear()
        self.gate.deadline = deadline
        failed: set[str] = set()
        poison: set[str] = set()
        waits: dict[str, datetime] = {}
        work: list[tuple[str, Timer]] = []
        newer: list[tuple[str, str]] = []
        for record_id, body in bodies:
            try:
                work.extend((record_id, timer) for timer in read_timers(body))
            except NewerFormatError:
                newer.append((record_id, body))
            except ValidationError as exc:
                failed.add(record_id)
                poison.add(record_id)
                self._poison(exc)
        kept = self._send_back(newer)
        failed.update(kept)
        work.sort(key=lambda pair: pair[1].due_ms)
        repaced = self.pacing.repace_batch([timer for _, timer in work], self.queues.control)
        work = [(record, repaced.get(index, timer)) for index, (record, timer) in enumerate(work)]
        if work:
            self.arrivals.arrived(timer for _, timer in work)
            # Every timer on a thread of its own: the longest attempt (up to the queue's 120 s timeout)
            # bounds the invocation, which `deadline.function_timeout` sizes the function for.
            outcomes = circuit_breaker.OutcomeBatch()
            with ThreadPoolExecutor(max_workers=max(DISPATCH_THREADS, len(work))) as pool:
                results = list(
                    pool.map(
                        lambda i: self._counted((counted, outcomes), work[i][1], int(i in repaced)), range(len(work))
                    )
                )
            circuit_breaker.flush(self.ctx, outcomes)
            failed.update(record_id for (record_id, _), result in zip(work, results, strict=True) if not result.ok)
            waits = _waits(work, results)
        waits.update(kept)
        return list(dict.fromkeys(record_id for record_id, _ in bodies if record_id in failed)), waits, poison

    def _send_back(self, newer: list[tuple[str, str]]) -> dict[str, datetime]:
        """Timer messages of a newer release go back to the queue for a newer dispatcher: sent again as new
        messages (this record then succeeds and is deleted). Those SQS did not take stay failed, hidden
        until SEND_BACK_SECONDS from now (returned, record -> when): one receive of the DLQ's budget each."""
        if not newer:
            return {}
        log("newer_timer_format", records=len(newer))
        self.ctx.metrics.count("NewerTimerFormat", len(newer))
        not_sent = self.ctx.timers.send_back([body for _, body in newer])
        back_at = self.ctx.clock() + timedelta(seconds=SEND_BACK_SECONDS)
        return {newer[index][0]: back_at for index in sorted(not_sent)}

    def _newer_record(self, timer: Timer, exc: NewerFormatError) -> Result:
        """A record the timer needs was written by a newer release: nothing is written for it here, and the timer
        goes back to the queue as a newer timer does, for a newer dispatcher (so it never nears the DLQ)."""
        log("newer_item_format", id=timer.id, queue=timer.queue, error=str(exc))
        self.ctx.metrics.count("NewerItemFormat", queue=timer.queue)
        if self.ctx.timers.send_back([pack_to_json([timer])]):
            return Result(False, "newer_format", back_at=self.ctx.clock() + timedelta(seconds=SEND_BACK_SECONDS))
        return Result(True, "newer_format")

    def _poison(self, exc: ValidationError) -> Result:
        log("poison_timer", error=str(exc))
        self.ctx.metrics.count("Poison")
        return Result(False, "poison")

    def _counted(self, batch: tuple[CountBatch, circuit_breaker.OutcomeBatch], timer: Timer, repaces: int) -> Result:
        """`process_timer` on a worker thread, its status changes and attempt outcomes counted with the batch's."""
        counted, outcomes = batch
        try:
            with self.ctx.store.counting_into(counted), circuit_breaker.counting_into(outcomes):
                return self.process_timer(timer, repaces)
        finally:
            self.arrivals.left(timer)

    def process_timer(self, timer: Timer, repaces: int = 0) -> Result:
        """One timer; no exception escapes, so nothing raised for one message fails its batch-mates."""
        try:
            return self.gate.process(timer, repaces=repaces)
        except NewerFormatError as exc:
            return self._newer_record(timer, exc)
        except (StoreError, DeliveryError, TimerQueueError) as exc:
            # Transient: the timer comes back (SQS redelivers its record) and the attempt is retried.
            log("dispatch_failed", id=timer.id, queue=timer.queue, error=str(exc))
            return Result(False, "error")
        except Exception as exc:
            log("dispatch_crashed", id=timer.id, queue=timer.queue, error=f"{type(exc).__name__}: {exc}")
            self.ctx.metrics.count("DispatchError", queue=timer.queue)
            return Result(False, "error")


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
