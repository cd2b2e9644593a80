"""Every table item a message writes or reads, with its peak rate per item and per partition, in two cases:
10,000 deliveries/s on one queue and 100,000/s over 100 queues; and the due index's adaptive widths, simulated
with the writers' own rule (`core.due_width`) to show what a bucket's busiest shard takes.

The per-message operations are the ones the code makes (docs/design.md, "Paths and their costs", counted by
`make bench`'s *steady* section); the rest of each figure is arithmetic on the scenario, written out below.
"""

from __future__ import annotations

import math
import random
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

from hourglass.core import circuit_breaker, due_width, keys, message_partitions
from hourglass.core.due_width import Record, Widths

from bench import item_kinds, pacing_rate
from bench.report import Section

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
PARTITION_WRU = 1_000  # DynamoDB, per partition: table and each GSI
PARTITION_RRU = 3_000
POST_SIZE = 100  # messages per ingest POST
BATCH = 100  # deliveries per dispatcher invocation at these rates (10 packs of 10)
SEND_CHUNK = 500  # service.sweep.SEND_CHUNK: one pacing write per chunk of a rate-limited queue
COUNTS_PER_MESSAGE = 0.02  # status-counter ADDs per message (docs/design.md, "Counts")
RUN_SECONDS = 60  # the sweep's schedule
INVOCATIONS = 8  # sweep fan-out invocations at these rates (the stack's 8 shards: at most one per base shard)
BUCKETS_PER_RUN = 6  # buckets a run's window (look-ahead 300 s, 60 s buckets) touches
# Per message on each path (docs/design.md, "Paths and their costs"): the message item's put, begin and outcome (a
# claim besides, on the sweep path, only for a queue with limits, ordering or schedules: `QueueLimits.claims`); its
# due-index entry put at ingest and removed at the begin (none handed off).
MESSAGE_WRITES = {"sweep": 3, "handoff": 3}
DUE_ENTRY_WRITES = {"sweep": 2, "handoff": 0}


@dataclass(frozen=True)
class Scenario:
    name: str
    deliveries: float  # per second, every queue together (ingest at the same rate: the steady state)
    queues: int

    @property
    def per_queue(self) -> float:
        return self.deliveries / self.queues


SCENARIOS = (Scenario("10,000/s on one queue", 10_000, 1), Scenario("100,000/s over 100 queues", 100_000, 100))


@dataclass(frozen=True)
class Row:
    """One kind of item: the builder of its key, its partition, its rate per item and on its partition."""

    item: str
    key: str
    partition: str
    write_item: float  # write units/s on the busiest item of the kind
    read_item: float
    write_partition: float  # units/s on the busiest partition that holds it (every kind sharing it added)
    read_partition: float
    opt_in: str = ""  # the feature that writes it ("" for every message)

    @property
    def item_over(self) -> bool:
        """One item over a partition's limit: DynamoDB cannot split it (a hot key stays on one partition)."""
        return self.write_item > PARTITION_WRU or self.read_item > PARTITION_RRU

    @property
    def partition_over(self) -> bool:
        """The partition key's items together over the limit: served only once DynamoDB splits the partition
        for heat (by sort-key range, minutes after the load arrives), never at once."""
        return self.write_partition > PARTITION_WRU or self.read_partition > PARTITION_RRU


def spread(per_queue: float) -> int:
    """The partitions a queue's messages are in at `per_queue` messages a second, steady: a queue taking more than
    SPREAD_AT in a window is spread (`core.message_partitions`), its new messages over PARTITIONS."""
    taken = per_queue * message_partitions.WINDOW_SECONDS
    return message_partitions.PARTITIONS if message_partitions.spreads(int(taken)) else 1


def rows(s: Scenario, index_shard_wru: float) -> list[Row]:
    """The items of one scenario. A queue's messages, with their bodies, dedup records and history, are in their
    partitions (`message_pk`: the queue's, or 64 once it is busy); every queue-scoped item is in the queue's
    partition (pk = queue). Each partition's total is the sum of what each kind puts on it at the queue's rate."""
    d = s.per_queue
    parts = spread(d)
    posts = d / POST_SIZE
    batches = d / BATCH
    # A message partition: its message items (put, begin, outcome; a claim besides only with limits).
    message_w = MESSAGE_WRITES["sweep"] * d / parts
    # The queue's partition: counters, queue item reads, and its window records until it spreads.
    counter_writes = COUNTS_PER_MESSAGE * d
    window_writes = d / message_partitions.REPORT_AT  # a queue at this rate spreads in its first window
    queue_reads = posts + batches  # strongly consistent, ≤ 4 KB: 1 RU each
    queue_partition_w = counter_writes
    queue_partition_r = queue_reads
    # One write per window a batch's slots fall in (windows of 4-64 slots, `core.pacing`), simulated with the rule
    # itself at the queue's rate: ingest requests and sweep chunks, both paths at the whole rate (an upper bound).
    paced = [pacing_rate.core_run(size, rate=d) for size in (POST_SIZE, SEND_CHUNK)]
    pacing_item = sum(run.peak_item for run in paced)
    pacing_writes = sum(run.peak_total for run in paced)
    slot_writes = 2 * d  # a slot taken and given back per attempt (key or queue concurrency)
    # A queue created by 1.3.0 or later keeps its slots SLOT_GROUP to a partition (`keys.slot_pk`), 1,000 of them here.
    slot_partition_w = slot_writes * keys.SLOT_GROUP / 1_000
    # A dispatcher batch's outcomes: one ADD on one of the current bucket's BREAKER_SHARDS items (an attempt's own
    # before they were counted per batch: `d`).
    breaker_writes = batches
    # A window Query per batch with a failure (10 % failing: nearly every batch of 100): (BUCKETS + 1) x
    # BREAKER_SHARDS items of ~80 B, eventually consistent.
    breaker_query_ru = math.ceil((circuit_breaker.BUCKETS + 1) * keys.BREAKER_SHARDS * 80 / 4096) / 2
    breaker_reads = batches * breaker_query_ru
    bucket_records_w = s.deliveries / due_width.FLUSH + 1  # ADDs of the writers' counts, the widen writes
    run = per_run()
    bucket_records_r = run[item_kinds.BUCKETS][1] / RUN_SECONDS
    sweeper_w = run[item_kinds.SWEEPER][0] / RUN_SECONDS
    q = "queue"
    m = "message_pk: queue" if parts == 1 else f"message_pk: <queue>#<n < {parts}>"
    return [
        Row("message item", "message_sk(id), message_pk(queue, id)", m, 4 / 60, 0.0, message_w, 0.0),
        # The `later`-compatible API's tasks share one partition (LATER_QUEUE, never spread: no queue item to spread).
        Row("`later` task (the compatible API)", "LATER_QUEUE / message_sk(id)", keys.LATER_QUEUE, 4 / 60, 0.0,
            min(d, 100.0) * MESSAGE_WRITES["sweep"], 0.0, "`later` API, modelled at 100 tasks/s"),
        Row("body item (bodies above the item threshold)", "body_sk(id, version)", m, 1 / 60, 1 / 60,
            message_w + d / parts, d / parts, "large bodies"),
        Row("dedup record", "dedup_sk(dedup_id), dedup_pk", m, 1.0, 0.0, message_w + d / parts, 0.0, "dedup ids"),
        Row("attempt history", "history_key(id, attempt)", m, 1.0, 0.0, message_w + 2 * d / parts, 0.0,
            "history, per retry"),
        Row("status counters", f"count_sk(epoch, shard<{keys.COUNT_SHARDS})", q,
            counter_writes / keys.COUNT_SHARDS, 0.0, queue_partition_w, queue_partition_r),
        Row("queue item (read at each POST and dispatcher batch)", "QUEUE_SK", q, 0.0, queue_reads,
            queue_partition_w, queue_partition_r),
        Row("window records (until the queue spreads: its first window at this rate)", "rate_sk(window)", q,
            window_writes, 0.0, queue_partition_w + window_writes, queue_partition_r),
        Row("pacing items and holders record", "pace_sk(key, window)", q, pacing_item, pacing_item,
            queue_partition_w + pacing_writes, queue_partition_r + pacing_writes, "rate_limit"),
        Row("concurrency slots", "slot_key(slot, key), slot_pk",
            f"slot_pk: <queue>#c<epoch>.<slot // {keys.SLOT_GROUP}>", slot_writes / 1_000, slot_writes / 1_000,
            slot_partition_w, slot_partition_w, "max_concurrency 1,000"),
        Row("breaker buckets", "breaker_sk(since, bucket, shard)", q, breaker_writes, breaker_reads,
            queue_partition_w + breaker_writes, queue_partition_r + breaker_reads, "circuit breaker"),
        Row("schedule items", "schedule_sk(name)", q, 1 / 60, 0.0, queue_partition_w, queue_partition_r,
            "schedules"),
        Row("queue notices, ended marker, operations", "queue_notice_sk, ENDED_SK, operation_sk", q, 0.0, 0.0,
            queue_partition_w, queue_partition_r, "rare"),
        Row("list index entry (GSI `list`)", "list_pk = message_pk", f"list_{m}", 1 / 60, 0.0, d / parts, 0.0,
            "order_due"),
        Row("created index entry (GSI `created`)", "list_pk = message_pk", f"list_{m}", 1 / 60, 0.0, d / parts, 0.0,
            "order_created"),
        Row("due-index entry (GSI `due`)", "bucket_pk(bucket, shard < width)", "bucket#shard", 1 / 60,
            0.0, index_shard_wru, 0.5 * index_shard_wru / 40),
        # An entry: an index write with the final write, another when its notice is sent and it leaves.
        Row("failure-notice outbox", f"outbox_pk(id) (due index, {keys.OUTBOX_SHARDS} shards)", "notice#<shard>",
            0.0, 0.0, 2 * 0.05 * s.deliveries / keys.OUTBOX_SHARDS, 0.0, "failure notices, 5 % failing"),
        Row("due-bucket records", "BUCKETS_PK / bucket_sk(bucket)", keys.BUCKETS_PK, bucket_records_w,
            bucket_records_r, bucket_records_w, bucket_records_r),
        Row("sweep state and shard progress", "SWEEPER_PK / SWEEPER_STATE_SK, shard_sk(shard)", keys.SWEEPER_PK,
            1 / RUN_SECONDS, run[item_kinds.SWEEPER][1] / RUN_SECONDS, sweeper_w, sweeper_w),
        Row("queue registry, running operations, schedule repair",
            "REGISTRY_PK, RUNNING_OPERATIONS_PK / running_operation_sk, REPAIR_PK / REPAIR_SK", "@queues etc.",
            0.0, 0.0, 0.0, 0.0, "queue and bulk calls"),
        Row("list of every schedule (due index)", "SCHEDULES_PK / schedules_sk(queue, name)", "schedules#", 0.0,
            0.0, 0.0, 0.0, "schedules"),
    ]  # fmt: skip


def per_message(path: str, *, order_created: bool = True, order_due: bool = True) -> dict[str, tuple[float, float]]:
    """(writes, reads) that one message makes on each kind of item on a path ("sweep" or "handoff") with no
    opt-in feature: what `rows` multiplies by the rate. Items written per sweep run (sweep state) are not
    per message; the due-bucket records only from a process that counts `due_width.FLUSH` into a bucket."""
    swept = path == "sweep"
    figures = {
        item_kinds.MESSAGE: (float(MESSAGE_WRITES[path]), 0.0),
        item_kinds.COUNTERS: (COUNTS_PER_MESSAGE, 0.0),
        item_kinds.QUEUE: (0.0, 1 / POST_SIZE + 1 / BATCH),
        # The sweep's Query reads each entry once (docs/capacity.md: about 100 bytes an entry).
        item_kinds.DUE_ENTRY: (float(DUE_ENTRY_WRITES[path]), 1.0 if swept else 0.0),
        item_kinds.BUCKETS: (1 / due_width.FLUSH if swept else 0.0, 0.0),
    }
    if order_due:
        figures[item_kinds.LIST_ENTRY] = (1.0, 0.0)
    if order_created:
        figures[item_kinds.CREATED_ENTRY] = (1.0, 0.0)
    return figures


def per_run() -> dict[str, tuple[float, float]]:
    """(writes, reads) of each sweep run (every INVOCATIONS fan-out invocation and the scheduled one) on the
    items written per run, not per message: the sweep state and shards' progress, the due buckets' records read."""
    return {
        item_kinds.SWEEPER: (INVOCATIONS + 1, INVOCATIONS + 1),
        item_kinds.BUCKETS: (0.0, INVOCATIONS * BUCKETS_PER_RUN),
    }


@dataclass
class BucketRun:
    """What writes at one rate into bucket after bucket did under the adaptive widths: the first (cold) bucket's
    and the next one's busiest shard in any second, the first's final width, the records' writes."""

    rate: float
    processes: int
    peak_shard_wru: int  # the first bucket: from the deployment's shards, nothing known
    next_peak_shard_wru: int  # the bucket after it: each writer starts as wide as the one before
    final_width: int
    record_writes: int
    messages: int

    @property
    def extra_wu_per_message(self) -> float:
        return self.record_writes / max(1, self.messages)


def write_buckets(
    rate: float, *, bucket_seconds: int = 60, shards: int = 8, processes: int | None = None, seed: int = 7
) -> BucketRun:
    """Messages at `rate` for two buckets' time at one fixed delay (the worst case: everything written now is
    due in the same bucket), in POSTs of 100 dealt over `processes` writers, each with its own `Widths` (the
    code's), and the buckets' records shared: the busiest shard's writes in any one second."""
    rnd = random.Random(seed)
    processes = processes or max(1, math.ceil(rate * 0.1 / POST_SIZE))  # a POST takes ~100 ms
    writers = [Widths(shards) for _ in range(processes)]
    records: dict[int, Record] = {}
    per_second: dict[tuple[int, int], Counter[int]] = defaultdict(Counter)
    record_writes = 0
    messages = int(rate * bucket_seconds * 2)
    for start in range(0, messages, POST_SIZE):
        count = min(POST_SIZE, messages - start)
        elapsed = start / rate
        bucket = 1 + int(elapsed // bucket_seconds)
        widths = writers[(start // POST_SIZE) % processes]
        now = EPOCH + timedelta(seconds=elapsed)
        record = records.get(bucket, Record(0, None, now))
        inherited = widths.inherited(bucket)
        if inherited is not None:
            record = replace(record, width=max(record.width or shards, inherited))
            record_writes += 1
            widths.widen(bucket, inherited)
        due = widths.count(bucket, count, now)
        if due is not None:
            record = replace(record, written=record.written + due)
            record_writes += 1
            wider = widths.learned(bucket, record, now)
            if wider is not None:
                record = replace(record, width=max(record.width or shards, wider))
                record_writes += 1
                widths.widen(bucket, wider)
        records[bucket] = record
        per_second[(bucket, int(elapsed))].update(rnd.randrange(widths.width(bucket)) for _ in range(count))
    peaks = {b: max((max(c.values()) for (pb, _), c in per_second.items() if pb == b), default=0) for b in (1, 2)}
    final = records[1].width or shards if 1 in records else shards
    return BucketRun(rate, processes, peaks[1], peaks[2], final, record_writes, messages)


BUCKET_CASES = {
    "10 messages/s (low load)": 10.0,
    "200 messages/s (a usual busy bucket)": 200.0,
    "10,000/s (50 times that)": 10_000.0,
    "16,700/s (a million due in one minute)": 16_700.0,
}


def index_shard_peak(run: BucketRun) -> float:
    """The busiest due-index shard: the writes' busiest second, or the deletes when the bucket comes due (its
    entries, written at `rate` for its seconds, removed within its own seconds over its final width)."""
    return max(run.peak_shard_wru, run.next_peak_shard_wru, run.rate / run.final_width)


def section() -> Section:
    result = Section("capacity_items", "Capacity per item (every item a message writes or reads; model)")
    buckets = {name: write_buckets(rate) for name, rate in BUCKET_CASES.items()}
    for name, run in buckets.items():
        result.at_most(
            f"due index, {name} into one bucket: busiest shard",
            index_shard_peak(run),
            f"WU/s (first bucket {run.peak_shard_wru:,}, next {run.next_peak_shard_wru:,}; width "
            f"{run.final_width}, {run.processes} writers)",
            PARTITION_WRU,
            shown="1,000",
        )
    cold = write_buckets(100_000.0)
    result.at_most(
        "due index, 100,000/s into one cold bucket (every queue of the second case at one delay): busiest shard",
        index_shard_peak(cold),
        f"WU/s (the first bucket's first second {cold.peak_shard_wru:,}, the next bucket "
        f"{cold.next_peak_shard_wru:,}; width {cold.final_width}, {cold.processes} writers)",
        PARTITION_WRU,
        shown="1,000",
    )
    low = buckets["10 messages/s (low load)"]
    # A process's first POST of 100 into a bucket is added to its record at once (due_width.FIRST): at most one
    # write per 100 messages at a low rate.
    result.at_most("due-bucket records: extra write units per message at 10 messages/s", low.extra_wu_per_message,
                   "WU", 0.01, shown="0.01")  # fmt: skip
    busy = buckets["10,000/s (50 times that)"]
    result.check("due-bucket records: extra write units per message at 10,000/s", round(busy.extra_wu_per_message, 4),
                 "WU")  # fmt: skip
    index_peak = {s.name: index_shard_peak(write_buckets(s.deliveries)) for s in SCENARIOS}
    table = {s.name: rows(s, index_peak[s.name]) for s in SCENARIOS}
    for s in SCENARIOS:
        for row in table[s.name]:
            item = "OVER" if row.item_over else "within"
            partition = "OVER: split for heat" if row.partition_over else "within"
            result.check(
                f"{s.name}: {row.item}" + (f" ({row.opt_in})" if row.opt_in else ""),
                f"item {row.write_item:,.1f} WU/s, {row.read_item:,.1f} RU/s ({item}); partition {row.partition} "
                f"{row.write_partition:,.0f} WU/s, {row.read_partition:,.0f} RU/s ({partition})",
            )
    for s in SCENARIOS:
        # The pacing items alone (a queue's `rate_limit` at its rate): what they add to the queue's partition.
        paced = [pacing_rate.core_run(size, rate=s.per_queue) for size in (POST_SIZE, SEND_CHUNK)]
        result.at_most(f"{s.name}: one queue's pacing items together (rate_limit {s.per_queue:,.0f})",
                       sum(run.peak_total for run in paced), "WU/s", PARTITION_WRU, shown="1,000")  # fmt: skip
    result.data.update(
        {
            "buckets": {name: asdict(run) | {"shard_peak": index_shard_peak(run)} for name, run in buckets.items()},
            "items": {
                name: [asdict(r) | {"item_over": r.item_over, "partition_over": r.partition_over} for r in rs]
                for name, rs in table.items()
            },
        }
    )
    hot = sorted({f"{r.item} ({name})" for name, rs in table.items() for r in rs if r.item_over})
    split = sorted({r.partition for rs in table.values() for r in rs if r.partition_over})
    result.notes.append("Single items over a partition's limit (no split serves them): " + ("; ".join(hot) or "none"))
    result.notes.append(
        "Partitions over the limit, served only after DynamoDB splits them for heat (docs/capacity.md says what a "
        "fix by design takes): " + ("; ".join(split) or "none")
    )
    result.notes.append("A model: per-message operations from the code, rates from the scenario; nothing timed.")
    return result


def main() -> int:
    print(section().markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
