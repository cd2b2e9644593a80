"""The sweep: claims due messages from the sparse due index and hands them to the timer queue.

A scheduled run sweeps every shard itself, or, when more is due than one invocation can claim,
splits the shards among fan-out invocations of the sweeper (see docs/design.md, "Fan-out").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from hourglass.adapters import storage
from hourglass.core import due_width, fanout, handoff, schedule
from hourglass.core.handoff import Claim, DueEntry
from hourglass.core.pacing import Slot
from hourglass.core.schedule import SweepKeys
from hourglass.core.sweep_state import ShardProgress, SweepState
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import InvokeError, NewerFormatError, StoreError
from hourglass.logs import log
from hourglass.service import transitions
from hourglass.service.context import Context


class StorageUsed(storage.DueIndex, storage.BucketWidths, storage.SweepProgress, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


INITIAL_LOOKBACK = timedelta(minutes=10)
# The watermark of a stack that has never been swept (no state item).
FIRST_RUN = -1
# Claims gathered (across the shards of a bucket) before they are sent: packs fill up, and a
# sweeper that dies strands at most this many until their leases end.
SEND_CHUNK = 500
# Claims are conditional writes of ~5-10 ms each: made concurrently, one invocation claims
# thousands per second instead of hundreds. Each thread takes a run of CLAIMS_PER_THREAD, so a
# handful of due entries does not become a burst of concurrent writes.
CLAIM_THREADS = 16
CLAIMS_PER_THREAD = 8
CLAIM_CHUNK = CLAIM_THREADS * CLAIMS_PER_THREAD
# A sweep stops starting buckets when its invocation has less time left than this (seconds).
TIME_MARGIN = 10
# Claims wait at most this long for their batch to fill before their timers go out: a sweep slowed
# by load sends what it claimed while it is still ahead of time, not after the whole bucket.
SEND_AFTER = timedelta(seconds=1)
# A scheduled run that took longer than this sweeps on from where it got to the look-ahead of the
# time it has reached (see `_catch_up`); a quick run (the usual case) does nothing more.
CATCH_UP_AFTER = timedelta(seconds=1)

Invoke = Callable[[dict[str, Any]], None]
T = TypeVar("T")


@dataclass
class SweepReport:
    read: int = 0
    claimed: int = 0
    handed_off: int = 0
    send_failed: int = 0
    recovered: int = 0
    complete: bool = True
    watermark: int = 0
    out_of_time: bool = False
    workers: int = 1  # fan-out invocations (the name of the field in the `sweep` log line and the result)
    shard_reads: dict[int, int] = field(default_factory=dict)


class Sweeper:
    def __init__(
        self,
        ctx: Context,
        *,
        shards: Iterable[int] | None = None,
        invoke: Invoke | None = None,
        until: int | None = None,
        run_id: int = 0,
    ) -> None:
        """With `shards`, a fan-out invocation sweeping only those up to `until`; else a scheduled run."""
        self.ctx = ctx
        self.store: StorageUsed = ctx.store
        self.is_fanout = shards is not None
        self.shards = list(shards) if shards is not None else list(range(ctx.settings.shards))
        self.invoke = invoke
        self.until = until
        self.run_id = run_id
        self._pool: ThreadPoolExecutor | None = None
        self._old_buckets: set[int] | None = None

    def run(self, time_left: Callable[[], float] = lambda: 60.0) -> SweepReport:
        """One sweep: main window then recovery; stops early when `time_left()` gets short."""
        now = self.ctx.clock()
        start_ms = to_ms(now - INITIAL_LOOKBACK)
        state = self.store.load_sweep_state(SweepState(FIRST_RUN, FIRST_RUN))
        self._old_buckets = None
        if state.watermark == FIRST_RUN:
            # No sweep state yet: the first sweep covers everything ever indexed (rows bulk-loaded
            # due in the past, a sweeper that failed for its first hours), reading only the
            # buckets that hold entries below the usual initial window.
            width = self.ctx.settings.bucket_seconds * 1000
            self._old_buckets = {b for b in self.store.indexed_buckets() if b * width <= start_ms}
            first = min((b * width - 1 for b in self._old_buckets), default=start_ms)
            state = replace(state, watermark=min(first, start_ms), recovery_watermark=start_ms)
        report = SweepReport()
        with ThreadPoolExecutor(max_workers=CLAIM_THREADS) as self._pool:
            if self.is_fanout:
                self._run_fanout(state, now, report, time_left)
            else:
                self._run_scheduled(state, now, report, time_left)
        log("sweep", **{k: v for k, v in vars(report).items() if k != "shard_reads"})
        for name, value in (("HandedOff", report.handed_off), ("Recovered", report.recovered)):
            self.ctx.metrics.count(name, value)
        return report

    def _run_fanout(
        self, state: SweepState, now: datetime, report: SweepReport, time_left: Callable[[], float]
    ) -> None:
        """Sweeps its shards and records their progress; the next scheduled run moves the watermark."""
        ahead = self.ctx.settings.timing.sweep_ahead
        end = self.until if self.until is not None else schedule.main_sweep_end(now, ahead)
        starts = {shard: state.start_of(shard) for shard in self.shards}
        reached = self._sweep(starts, end, now, report, time_left, recovery=False)
        self.store.save_shard_progress(self._progress(starts, reached, report, self.run_id))
        report.watermark = reached

    def _run_scheduled(
        self, state: SweepState, now: datetime, report: SweepReport, time_left: Callable[[], float]
    ) -> None:
        ahead = self.ctx.settings.timing.sweep_ahead
        end = schedule.main_sweep_end(now, ahead)
        run_id = to_ms(now)
        starts = {shard: state.start_of(shard) for shard in self.shards}
        if state.last_run:
            # Since the last run, ingest handed off only what was due within its lookahead + safety
            # of then: with a lookahead lowered since, what is due after last_run + lookahead may be
            # written with index keys below the stored watermark. Sweep again from there (in the
            # steady state the watermark is exactly last_run + lookahead: nothing is read twice).
            cap = state.last_run + int(ahead * 1000)
            starts = {shard: min(start, cap) for shard, start in starts.items()}
        groups = self._plan(state, starts)
        own = self._fan_out(groups, end, run_id)
        own_starts = {shard: starts[shard] for shard in own}
        reached = self._sweep(own_starts, end, now, report, time_left, recovery=False)
        if len(groups) == 1 and reached == end:
            reached, as_of = self._catch_up(end, now, report, time_left)
            end, run_id = reached, to_ms(as_of)
        main_read = report.read
        if len(groups) > 1:
            self.store.save_shard_progress(self._progress(own_starts, reached, report, run_id))
        # Every shard is swept up to its own start, or up to `reached` if this run swept it.
        watermark = min(max(start, reached) if shard in own_starts else start for shard, start in starts.items())
        recovery_end = min(schedule.recovery_sweep_end(now), watermark)
        recovery = state.recovery_watermark
        if recovery < recovery_end and report.complete:
            everywhere = dict.fromkeys(self.shards, recovery)
            recovery = self._sweep(everywhere, recovery_end, now, report, time_left, recovery=True)
        self.store.save_sweep_state(
            SweepState(
                watermark,
                recovery,
                last_due=main_read,
                last_end=end,
                last_run=run_id,
                last_workers=len(groups),
                last_complete=not report.out_of_time,
            )
        )
        report.watermark = watermark
        report.workers = len(groups)

    def _catch_up(
        self, end: int, started: datetime, report: SweepReport, time_left: Callable[[], float]
    ) -> tuple[int, datetime]:
        """Sweeps on, every shard from `end`, to the look-ahead of NOW while the run keeps falling behind:
        what fell inside the look-ahead while a slow run (CPU contention, a busy emulator) swept is handed
        off ahead of time by this run, not by the next one after it was due. Each pass ends at the
        look-ahead of its own start, as a run does, so a write in flight is never passed (docs/design.md).
        Returns how far every shard got and the time that end counts from."""
        ahead = self.ctx.settings.timing.sweep_ahead
        as_of = started
        while True:
            now = self.ctx.clock()
            high = schedule.main_sweep_end(now, ahead)
            if now - as_of < CATCH_UP_AFTER or time_left() < TIME_MARGIN:
                return end, as_of
            reached = self._sweep(dict.fromkeys(self.shards, end), high, now, report, time_left, recovery=False)
            if reached < high:
                return reached, as_of
            end, as_of = high, now

    def _plan(self, state: SweepState, starts: Mapping[int, int]) -> list[list[int]]:
        if self.invoke is None:
            return [self.shards]
        estimate, lagging = _previous_load(state, starts)
        count = fanout.invocation_count(estimate, self.ctx.settings.sweep_capacity, len(self.shards), lagging=lagging)
        return fanout.split(self.shards, count)

    def _fan_out(self, groups: list[list[int]], end: int, run_id: int) -> list[int]:
        """Invokes the function once per group but the first; returns the shards this run sweeps itself."""
        own = list(groups[0])
        for group in groups[1:]:
            try:
                assert self.invoke is not None
                self.invoke(fanout.Invocation(tuple(group), end, run_id).to_event())
            except InvokeError as exc:
                log("sweep_worker_not_started", shards=group, error=str(exc))
                own.extend(group)
        return own

    def _progress(
        self, starts: Mapping[int, int], reached: int, report: SweepReport, run_id: int
    ) -> dict[int, ShardProgress]:
        return {
            shard: ShardProgress(max(start, reached), report.shard_reads.get(shard, 0), run_id, not report.out_of_time)
            for shard, start in starts.items()
        }

    def _sweep(
        self,
        starts: Mapping[int, int],
        high: int,
        now: datetime,
        report: SweepReport,
        time_left: Callable[[], float],
        *,
        recovery: bool,
    ) -> int:
        """Hand off everything due in (start of its shard, high]; returns how far every shard got without a gap."""
        low = min(starts.values())
        bucket_seconds = self.ctx.settings.bucket_seconds
        recent = schedule.bucket_of(self.ctx.clock() - INITIAL_LOOKBACK, bucket_seconds)
        for bucket in schedule.buckets_between(low + 1, high, bucket_seconds):
            bucket_start = bucket * bucket_seconds * 1000 - 1
            if self._old_buckets is not None and bucket < recent and bucket not in self._old_buckets:
                continue
            if time_left() < TIME_MARGIN:
                report.complete = False
                report.out_of_time = True
                return max(low, bucket_start)
            batch = _Batch(self, now, report, recovery)
            paced: list[DueEntry] = []
            swept = {shard: start for shard, start in starts.items() if start < bucket_start + bucket_seconds * 1000}
            width = self.store.bucket_width(bucket) if swept else None
            for shard, start in swept.items():
                for part in due_width.shards_under(shard, self.ctx.settings.shards, width or 0):
                    self._sweep_shard(shard, schedule.bucket_pk(bucket, part), start, high, batch, paced)
            self._hand_off_paced(paced, batch)
            earliest_failure = batch.flush()
            if earliest_failure is not None:
                report.complete = False
                return max(low, earliest_failure - 1)
        return high

    def _sweep_shard(self, shard: int, pk: str, low: int, high: int, batch: _Batch, paced: list[DueEntry]) -> None:
        """Claims and hands off the due entries of one of the bucket's partitions under base `shard` (one of
        the bucket's width, `core.due_width`); a rate-limited queue's go to `paced`, handed off once every
        shard of the bucket is read, so their slots follow due order across shards."""
        entries = self.store.query_due(
            pk,
            schedule.sort_key_bound(low + 1, upper=False),
            schedule.sort_key_bound(high, upper=True),
        )
        report = batch.report
        for chunk in _chunks(entries, CLAIM_CHUNK):
            report.read += len(chunk)
            report.shard_reads[shard] = report.shard_reads.get(shard, 0) + len(chunk)
            limited = [entry for entry in chunk if self.ctx.limits.rate(entry.queue) is not None]
            if limited:
                paced.extend(limited)
                chunk = [entry for entry in chunk if self.ctx.limits.rate(entry.queue) is None]
            self._claim_chunk(chunk, [None] * len(chunk), batch)

    def _hand_off_paced(self, entries: list[DueEntry], batch: _Batch) -> None:
        """Per queue and chunk, in due order: pacing slots first (one write), then claims leased from
        each slot (a failed claim leaves its slot unused, which only lowers the rate)."""
        by_queue: dict[str, list[DueEntry]] = {}
        for entry in sorted(entries, key=lambda e: e.order):
            by_queue.setdefault(entry.queue, []).append(entry)
        for queue, queued in by_queue.items():
            rate = self.ctx.limits.rate(queue)
            for chunk in _chunks(queued, SEND_CHUNK):
                if rate is None:
                    self._claim_chunk(chunk, [None] * len(chunk), batch)
                    continue
                # From the time of the allocation: the bucket's reads may have taken a while since `batch.now`.
                now = self.ctx.clock()
                starts = [entry.start() for entry in chunk]
                slots = self.ctx.pacer.scoped_slots(queue, rate, starts, now)
                self._claim_chunk(chunk, [*self.ctx.handoff.take_held(queue, rate, starts, slots, now)], batch)

    def _claim_chunk(self, chunk: list[DueEntry], slots: list[Slot | None], batch: _Batch) -> None:
        report = batch.report
        leases = [
            schedule.claim_lease(from_ms(entry.due_ms if slot is None else slot.start_ms), batch.now)
            for entry, slot in zip(chunk, slots, strict=True)
        ]
        moves = [self._moved(entry, slot) for entry, slot in zip(chunk, slots, strict=True)]
        # A queue using no opt-in feature is handed off without a claim (`QueueLimits.claims`): its timer's
        # start is conditional on the version, and its entry stays in the index until then.
        claimed_queues = {queue: self.ctx.limits.claims(queue) for queue in {entry.queue for entry in chunk}}
        written = [slot is not None or claimed_queues[e.queue] for e, slot in zip(chunk, slots, strict=True)]
        claims = iter(self._claim_all(*_written(written, chunk, leases, moves), batch.now))
        for entry, lease, slot, claim in zip(chunk, leases, slots, written, strict=True):
            claimed, chained = next(claims) if claim else (True, False)
            if not claimed:
                if batch.recovery:
                    # Still leased (a late claim, or an earlier recovery): its holder may yet die
                    # before the hand-off, so the recovery watermark waits for the lease to end.
                    batch.hold(entry.due_ms)
                continue
            report.claimed += claim
            batch.add(entry, lease, slot, chained, written=claim)

    def _moved(self, entry: DueEntry, slot: Slot | None) -> SweepKeys | None:
        return handoff.moved_keys(entry, slot, self.ctx.settings.timing)

    def _claim_all(
        self,
        entries: list[DueEntry],
        leases: list[datetime],
        moves: list[SweepKeys | None],
        now: datetime,
    ) -> list[tuple[bool, bool]]:
        """Per entry: claimed, and whether its next occurrence was stored with the claim (`_claim_one`)."""
        assert self._pool is not None
        if not entries:
            return []

        def claim(start: int) -> list[tuple[bool, bool]]:
            end = start + CLAIMS_PER_THREAD
            rows = zip(entries[start:end], leases[start:end], moves[start:end], strict=True)
            return [self._claim_one(e, now, lease, to) for e, lease, to in rows]

        runs = self._pool.map(claim, range(0, len(entries), CLAIMS_PER_THREAD))
        return [claimed for run in runs for claimed in run]

    def _claim_one(
        self, entry: DueEntry, now: datetime, lease: datetime, move_to: SweepKeys | None
    ) -> tuple[bool, bool]:
        """A claim whose write failed (retries exhausted, a dropped connection) may still have landed:
        its timer is sent as if it had. A timer for a message that was not claimed is harmless (the
        dispatcher's start is conditional on the version), while an error raised out of here would
        strand every landed claim of the chunk under its lease until the recovery sweep.

        A schedule occurrence claimed for its first attempt has its next occurrence stored here, a lookahead
        ahead of its attempt (`transitions.chain_ahead`), so its dispatcher does not chain."""
        try:
            claimed = self.store.claim(entry, now=now, lease_until=lease, move_to=move_to)
        except StoreError as exc:
            log("claim_uncertain", id=entry.id, queue=entry.queue, error=str(exc))
            return True, False
        if claimed is None:
            return False, False
        try:
            return True, transitions.chain_ahead(self.ctx, claimed, now)
        except NewerFormatError as exc:  # its queue or schedule is a newer release's: the chain repair sees to it
            log("newer_item_format", id=entry.id, queue=entry.queue, error=str(exc))
            return True, False

    def _hand_off(self, claims: list[Claim], now: datetime, report: SweepReport, recovery: bool) -> int | None:
        sent = self.ctx.handoff.send_claimed(claims, now, rates=self.ctx.limits.rate)
        refused = {claim.entry for claim in sent}
        earliest = None
        for entry in (claim.entry for claim in claims):
            if entry in refused:
                # Not stranded: the claim was given back and the watermark stops before it.
                report.send_failed += 1
                earliest = entry.due_ms if earliest is None else min(earliest, entry.due_ms)
            elif recovery:
                report.recovered += 1
            else:
                report.handed_off += 1
        return earliest


class _Batch:
    """Claims of one bucket waiting to be sent, and the earliest due time the watermark must stop before."""

    def __init__(self, sweeper: Sweeper, now: datetime, report: SweepReport, recovery: bool) -> None:
        self.sweeper = sweeper
        self.now = now
        self.report = report
        self.recovery = recovery
        self.claims: list[Claim] = []
        self.earliest_failure: int | None = None
        self.first_at = now  # when the oldest claim waiting to be sent was added

    def add(
        self, entry: DueEntry, lease: datetime, slot: Slot | None = None, chained: bool = False, *, written: bool = True
    ) -> None:
        added = self.sweeper.ctx.clock()
        if not self.claims:
            self.first_at = added
        self.claims.append(Claim(entry, lease, slot, chained, written))
        if len(self.claims) >= SEND_CHUNK or added - self.first_at >= SEND_AFTER:
            self.flush()

    def hold(self, due_ms: int) -> None:
        self.earliest_failure = _min(self.earliest_failure, due_ms)

    def flush(self) -> int | None:
        if self.claims:
            failed = self.sweeper._hand_off(self.claims, self.now, self.report, self.recovery)
            self.earliest_failure = _min(self.earliest_failure, failed)
            self.claims = []
        return self.earliest_failure


def _previous_load(state: SweepState, starts: Mapping[int, int]) -> tuple[int, bool]:
    """What the last scheduled run read in its window, and whether it fell behind."""
    if state.last_workers <= 1:
        return state.last_due, not state.last_complete
    reports = [state.shards[s] for s in starts if s in state.shards and state.shards[s].run == state.last_run]
    lagging = len(reports) < len(starts) or not all(p.complete for p in reports)
    return sum(p.due for p in reports), lagging


def _written(
    written: list[bool], entries: list[DueEntry], leases: list[datetime], moves: list[SweepKeys | None]
) -> tuple[list[DueEntry], list[datetime], list[SweepKeys | None]]:
    """The entries (with their leases and moves) whose hand-off is claimed by a write."""
    rows = [(e, lease, move) for e, lease, move, claim in zip(entries, leases, moves, written, strict=True) if claim]
    return [e for e, _, _ in rows], [lease for _, lease, _ in rows], [move for _, _, move in rows]


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
