"""The sweep: claims due messages from the sparse due index and hands them to the timer queue."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.adapters.store import DueEntry, SweepState
from hourglass.adapters.timer_queue import Scheduled, Timer
from hourglass.core import schedule
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.logs import log
from hourglass.service.context import Context

INITIAL_LOOKBACK = timedelta(minutes=10)
SEND_CHUNK = 100


@dataclass
class SweepReport:
    read: int = 0
    claimed: int = 0
    handed_off: int = 0
    send_failed: int = 0
    recovered: int = 0
    complete: bool = True
    watermark: int = 0


class Sweeper:
    def __init__(self, ctx: Context, *, shards: Iterable[int] | None = None) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.shards = list(shards) if shards is not None else list(range(ctx.settings.shards))

    def run(self, time_left: Callable[[], float] = lambda: 60.0) -> SweepReport:
        """One sweep: main window then recovery; stops early when `time_left()` gets short."""
        now = self.ctx.clock()
        start_ms = to_ms(now - INITIAL_LOOKBACK)
        state = self.store.load_sweep_state(SweepState(start_ms, start_ms))
        report = SweepReport()
        main_end = schedule.main_sweep_end(now, self.ctx.settings.lookahead)
        watermark = self._sweep(state.watermark, main_end, now, report, time_left, recovery=False)
        recovery_end = min(schedule.recovery_sweep_end(now), watermark)
        recovery = state.recovery_watermark
        if recovery < recovery_end and report.complete:
            recovery = self._sweep(recovery, recovery_end, now, report, time_left, recovery=True)
        self.store.save_sweep_state(SweepState(watermark, recovery))
        report.watermark = watermark
        log("sweep", **{k: v for k, v in vars(report).items()})
        for name, value in (("HandedOff", report.handed_off), ("Recovered", report.recovered)):
            self.ctx.metrics.count(name, value)
        return report

    def _sweep(
        self, low: int, high: int, now: datetime, report: SweepReport, time_left: Callable[[], float], *, recovery: bool
    ) -> int:
        """Hand off everything due in (low, high]; returns how far it got without a gap."""
        bucket_seconds = self.ctx.settings.bucket_seconds
        for bucket in schedule.buckets_between(low + 1, high, bucket_seconds):
            if time_left() < 10:
                report.complete = False
                bucket_start = bucket * bucket_seconds * 1000 - 1
                return max(low, bucket_start)
            earliest_failure = None
            for shard in self.shards:
                failed = self._sweep_shard(schedule.bucket_pk(bucket, shard), low, high, now, report, recovery)
                if failed is not None:
                    earliest_failure = failed if earliest_failure is None else min(earliest_failure, failed)
            if earliest_failure is not None:
                report.complete = False
                return max(low, earliest_failure - 1)
        return high

    def _sweep_shard(
        self, pk: str, low: int, high: int, now: datetime, report: SweepReport, recovery: bool
    ) -> int | None:
        entries = self.store.query_due(
            pk, schedule.sort_key_bound(low + 1, upper=False), schedule.sort_key_bound(high, upper=True)
        )
        batch: list[tuple[DueEntry, datetime]] = []
        earliest_failure = None
        for entry in entries:
            report.read += 1
            due = from_ms(entry.due_ms)
            lease = schedule.claim_lease(due, now)
            if not self.store.claim(entry, now=now, lease_until=lease):
                continue
            report.claimed += 1
            batch.append((entry, lease))
            if len(batch) >= SEND_CHUNK:
                earliest_failure = _min(earliest_failure, self._hand_off(batch, now, report, recovery))
                batch = []
        if batch:
            earliest_failure = _min(earliest_failure, self._hand_off(batch, now, report, recovery))
        return earliest_failure

    def _hand_off(
        self, batch: list[tuple[DueEntry, datetime]], now: datetime, report: SweepReport, recovery: bool
    ) -> int | None:
        scheduled = [
            Scheduled(
                Timer(e.queue, e.id, e.version, e.due_ms, to_ms(now)),
                schedule.timer_delay(from_ms(e.due_ms), now),
            )
            for e, _ in batch
        ]
        failed = {(s.timer.queue, s.timer.id) for s in self.ctx.timers.send(scheduled)}
        earliest = None
        for entry, lease in batch:
            if (entry.queue, entry.id) in failed:
                # Not stranded: the claim is given back and the watermark stops before it.
                self.store.release(entry, lease_until=lease)
                report.send_failed += 1
                earliest = entry.due_ms if earliest is None else min(earliest, entry.due_ms)
            elif recovery:
                report.recovered += 1
            else:
                report.handed_off += 1
        return earliest


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
