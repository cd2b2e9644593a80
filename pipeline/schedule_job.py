"""Bulk scheduling: validate a CSV / JSON Lines / Parquet file of messages and store them in Hourglass.

    python -m pipeline schedule --input messages.csv --rejects out/rejects.csv --summary out/summary.json

Ids are deterministic (queue + dedup_id, else source name + row number), so a rerun stores nothing twice.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from hourglass import contract
from hourglass.core import message_partitions
from hourglass.core.handoff import Timing
from hourglass.core.timestamps import ceil_ms, format_rfc3339, parse_rfc3339
from hourglass.logs import log
from hourglass.settings import Settings
from pyspark import SparkContext, StorageLevel
from pyspark.sql import DataFrame, SparkSession

from pipeline import deployment, io, table, transforms
from pipeline.planner import KeySettings
from pipeline.progress import ROWS, Counters, Reporter
from pipeline.session import run_job
from pipeline.table import Planned, TableWriter, WriteCounts, WriteSettings

# Validation partitions: large enough to amortize a task's start-up.
ROWS_PER_PARTITION = 25_000
# Write partitions are smaller: progress is counted as tasks finish, and a retried task redoes less.
WRITE_ROWS_PER_PARTITION = 2_000
COUNTERS = (ROWS, "scheduled", "duplicate", "handed_off", "swept", "expired", "throttled")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline schedule", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="file (or Parquet directory); local path or s3:// URL")
    p.add_argument("--format", choices=io.FORMATS, help="default: from the file name")
    p.add_argument("--source-name", help="names the file in row-based ids (default: its file name)")
    p.add_argument("--rejects", default="pipeline/out/rejects.csv", help="CSV of rejected rows: row, queue, reason")
    p.add_argument("--summary", help="also write the summary JSON here")
    p.add_argument("--now", type=parse_rfc3339, help="the time delays count from (RFC 3339; default: now)")
    p.add_argument(
        "--allow-private-callbacks",
        action="store_true",
        help="accept callback URLs on loopback/private addresses (the local runtime's default; "
        "also when HOURGLASS_ALLOW_PRIVATE_CALLBACKS=1)",
    )
    p.add_argument("--dry-run", action="store_true", help="validate and write rejects; store nothing")
    p.add_argument(
        "--max-write-units",
        type=float,
        help="write units per second for the whole job, shared by the concurrent write tasks (default: unpaced)",
    )
    p.add_argument("--partitions", type=int, help=f"default: one per {ROWS_PER_PARTITION} rows, at least one per core")
    p.add_argument("--progress-interval", type=float, default=5.0, help="seconds between progress lines")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    deployment.add_arguments(p)
    deployment.add_timing_arguments(p)
    return p


def run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    # Whole milliseconds, as stored: due times (rounded up) then equal the reported now + delay.
    now = ceil_ms(args.now or datetime.now(UTC))
    target = deployment.resolve(args, needs_timer_queue=True)
    timing = deployment.resolve_timing(args, target)
    fmt = io.input_format(args.input, args.format)
    source = args.source_name or PurePosixPath(args.input.rstrip("/")).name
    sc = spark.sparkContext
    rows = io.read_input(spark, args.input, fmt, source)
    plan = _plan(spark, args, target, now, rows, timing)
    with Reporter(sc, Counters(sc, ()), phase="validate", total=rows.total, interval=args.progress_interval):
        read = plan.count()
    rows.release()  # the plan holds what the rest needs
    validated = time.monotonic()
    log("validated", rows=read, files=rows.files, seconds=round(validated - started, 1))

    rejects = transforms.rejects(plan)
    io.write_csv(rejects.orderBy("row"), args.rejects)
    rejected = rejects.count()
    counts = WriteCounts()
    budget = None
    if not args.dry_run:
        counts, budget = _store(sc, plan, target, now, args, timing, accepted=read - rejected)
    plan.unpersist()

    elapsed = time.monotonic() - started
    summary = {
        "input": args.input,
        "files": rows.files,
        "source": source,
        "format": fmt,
        "table": target.table,
        "now": format_rfc3339(now),
        "dry_run": args.dry_run,
        "read": read,
        "scheduled": counts.scheduled,
        "duplicate": counts.duplicate,
        "rejected": rejected,
        **{name: getattr(counts, name) for name in ("handed_off", "swept", "expired", "handoff_fallback")},
        "throttled": counts.throttled,
        "write_units": counts.write_units,
        "max_write_units": args.max_write_units,
        "task_write_units": budget,
        "validate_s": round(validated - started, 2),
        "elapsed_s": round(elapsed, 2),
        "rows_per_s": round(read / elapsed) if elapsed > 0 else None,
        "rejects": args.rejects,
    }
    if args.summary:
        io.write_json(args.summary, summary, target)
    return summary


def _plan(
    spark: SparkSession,
    args: argparse.Namespace,
    target: deployment.Deployment,
    now: datetime,
    rows: io.MessageInput,
    timing: Timing,
) -> DataFrame:
    """The persisted plan of every input row (computed by the first action)."""
    partitions = args.partitions or max(
        spark.sparkContext.defaultParallelism, math.ceil(rows.total / ROWS_PER_PARTITION)
    )
    counts = rows.queue_counts()
    queues = table.load_queues(target, counts)
    log("queues", found=sorted(queues), missing=sorted(set(counts) - set(queues))[:20])
    # A queue this load gives a busy queue's share is spread before any of its messages is written (a dry run only
    # plans as the real one would).
    spread = frozenset(name for name in queues if message_partitions.spreads(counts[name]))
    if spread and not args.dry_run:
        table.spread_queues(target, [queues[name] for name in sorted(spread)])
    plan = transforms.plan_messages(
        rows.documents(partitions),
        queues,
        now=now,
        source=args.source_name or PurePosixPath(args.input.rstrip("/")).name,
        keys=KeySettings(shards=timing.shards, bucket_seconds=timing.bucket_seconds),
        stack=stack_settings(args, target),
        spread=spread,
    )
    return plan.persist(StorageLevel.MEMORY_AND_DISK)


def stack_settings(
    args: argparse.Namespace, target: deployment.Deployment, environ: Mapping[str, str] | None = None
) -> Settings:
    """What a row's target is checked against: the stack's allow-lists read as its functions read them (the
    HOURGLASS_* variables; the analytics stack sets them on the driver), with this deployment's timer queue."""
    env = Settings.from_env(environ)
    stack = replace(
        env,
        timer_queue_url=target.timer_queue_url or env.timer_queue_url,
        stack_name=env.stack_name or args.stack,
        allow_private_callbacks=env.allow_private_callbacks or args.allow_private_callbacks,
        api_key=None,  # shipped to every task with the planner, and not needed there
    )
    services = {kind: stack.service_targets(kind) for kind in contract.SERVICE_TARGETS}
    log("target_rules", sqs=stack.sqs_targets, services=services, private_callbacks=stack.allow_private_callbacks)
    return stack


def _store(
    sc: SparkContext,
    plan: DataFrame,
    target: deployment.Deployment,
    now: datetime,
    args: argparse.Namespace,
    timing: Timing,
    *,
    accepted: int,
) -> tuple[WriteCounts, float | None]:
    """Writes the accepted rows in small partitions and sums what each finished task reports.

    The counts come back as task results, not accumulators: Spark keeps one result per partition
    however often a task ran, and a retried task counts the items its failed attempt stored (they
    carry this run's id) as its own. The accumulators only drive the progress lines.
    """
    partitions = max(2 * sc.defaultParallelism, math.ceil(accepted / WRITE_ROWS_PER_PARTITION))
    concurrent = max(1, min(partitions, max_concurrent_tasks(sc)))
    share = args.max_write_units / concurrent if args.max_write_units else None
    settings = WriteSettings(
        lookahead=timing.lookahead,
        handoff_safety=timing.safety,
        shards=timing.shards,
        bucket_seconds=timing.bucket_seconds,
        write_units=share,
        run=uuid.uuid4().hex,
    )
    log("write_plan", partitions=partitions, concurrent_tasks=concurrent, task_write_units=share, run=settings.run)
    counters = Counters(sc, COUNTERS)
    writes = transforms.mark_repeats(transforms.accepted(plan)).repartition(partitions)
    with Reporter(sc, counters, phase="write", total=accepted, interval=args.progress_interval):
        results = writes.rdd.mapPartitions(_partition_writer(target, now, settings, counters)).collect()
    total = WriteCounts()
    for result in results:
        for name, value in result.items():
            setattr(total, name, getattr(total, name) + value)
    return total, share


def max_concurrent_tasks(sc: SparkContext) -> int:
    """How many tasks can run at once: with dynamic allocation, its maximum executors x cores each
    (not the executors already up), so the tasks' shares of the write budget never add up to more."""
    conf = sc.getConf()
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        executors = conf.get("spark.dynamicAllocation.maxExecutors")
        if executors and executors.isdigit():
            cores = int(conf.get("spark.executor.cores", "1") or 1)
            task_cpus = int(conf.get("spark.task.cpus", "1") or 1)
            return max(1, int(executors) * cores // task_cpus)
    return max(1, sc.defaultParallelism)


def _partition_writer(
    target: deployment.Deployment, now: datetime, settings: WriteSettings, counters: Counters
) -> Callable[[Iterable[Any]], Iterable[dict[str, int]]]:
    """Stores the first row of every id (later rows are duplicates) with one TableWriter per partition."""

    def write_partition(rows: Iterable[Any]) -> Iterator[dict[str, int]]:
        started = time.monotonic()
        seen = repeats = 0

        def firsts() -> Iterator[Planned]:
            nonlocal seen, repeats
            for row in rows:
                seen += 1
                if row.repeat:
                    repeats += 1
                else:
                    yield Planned.from_row(row)

        counts = TableWriter(target, now, settings).write_all(firsts())
        counts.duplicate += repeats
        counters.add({ROWS: seen, **{k: v for k, v in vars(counts).items() if k in COUNTERS}})
        log("partition_written", rows=seen, seconds=round(time.monotonic() - started, 2), **vars(counts))
        yield dict(vars(counts))

    return write_partition


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run_job("hourglass-schedule", args.master, lambda spark: run(spark, args), _done)


def _done(summary: dict[str, Any]) -> str:
    return (
        f"read {summary['read']}, scheduled {summary['scheduled']} (handed off {summary['handed_off']}), "
        f"duplicate {summary['duplicate']}, rejected {summary['rejected']} in {summary['elapsed_s']} s "
        f"({summary['rows_per_s']} rows/s); rejects in {summary['rejects']}"
    )


if __name__ == "__main__":
    sys.exit(main())
