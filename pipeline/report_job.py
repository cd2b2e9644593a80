"""Delivery report: status counts, lateness percentiles, attempts, failures, stuck messages, schedules.

python -m pipeline report --out pipeline/out/report                 (the live table, parallel Scan)
python -m pipeline report --export s3://bucket/exports/... --out ...  (a DynamoDB export)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hourglass.core.timestamps import format_rfc3339, parse_rfc3339
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import charts, deployment, io, records, report_md, table, transforms
from pipeline.report_md import Section
from pipeline.session import run_job

UNITS = ("minute", "hour", "day")


LATENESS_NOTE = (
    "delivered_at - max(due_at, created_at) of delivered messages: from the due time, or from when the "
    "message was stored if it was already due then."
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline report", description=__doc__.splitlines()[0])
    p.add_argument("--export", help="DynamoDB export (file, directory or s3:// prefix); default: scan the table")
    p.add_argument(
        "--segments",
        type=int,
        help="parallel Scan segments (default: one per 128 MB of the table's size, at least 2 per core)",
    )
    p.add_argument("--out", default="pipeline/out/report", help="output directory or s3:// prefix")
    p.add_argument("--now", type=parse_rfc3339, help="the report's 'now' (RFC 3339; default: now)")
    p.add_argument("--stuck-after", type=float, default=600.0, help="seconds past due that make a message stuck")
    p.add_argument("--top-errors", type=int, default=5, help="failure reasons listed per queue")
    p.add_argument(
        "--on-time-within",
        type=float,
        default=1.0,
        help="seconds after its occurrence time within which a schedule's occurrence counts as on time",
    )
    p.add_argument("--unit", choices=("auto", *UNITS), default="auto", help="deliveries-over-time granularity")
    p.add_argument(
        "--due-after",
        type=_due_after,
        metavar="TIME",
        help="also split lateness at this time (RFC 3339 with an offset, e.g. when a bulk load finished): "
        "messages due at or after it, and the rest",
    )
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    deployment.add_arguments(p)
    return p


def _due_after(text: str) -> datetime:
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is {exc} (e.g. 2026-11-21T10:00:00Z)") from None


def read_messages(
    spark: SparkSession, args: argparse.Namespace, newer: Any = None
) -> tuple[DataFrame, str, deployment.Deployment | None]:
    """Message records from the export if one is given, else a parallel Scan of the live table; message items of a
    newer format are left out, counted in the accumulator `newer` (`records.records`)."""
    if args.export:
        located = deployment.Deployment(table="", endpoint_url=args.endpoint_url, region=args.region or "us-east-1")
        messages, source = io.read_export(spark, args.export, located, newer)
        return messages, f"{args.export} ({source})", located
    target = deployment.resolve(args, needs_timer_queue=False)
    segments = args.segments or table.scan_segments(target, 2 * spark.sparkContext.defaultParallelism)
    scanned = spark.sparkContext.parallelize(range(segments), segments).mapPartitions(
        lambda parts: records.records(
            (item for part in parts for item in table.scan_segment(target, part, segments)), newer
        )
    )
    return spark.createDataFrame(scanned, records.SCHEMA), f"table {target.table} ({segments} segments)", target


def run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    now = args.now or datetime.now(UTC)
    newer = spark.sparkContext.accumulator(0)
    raw, source, located = read_messages(spark, args, newer)
    messages = transforms.with_lateness(raw).persist(StorageLevel.MEMORY_AND_DISK)
    count = messages.count()
    if newer.value:  # known once the count has read every item
        source += f"; {newer.value:,} message item(s) of a newer release's format left out"
    unit = args.unit if args.unit != "auto" else _unit(messages)
    tables = {
        "status_by_queue": transforms.status_counts(messages, by=("queue",)),
        "status_by_hour": transforms.status_counts(messages),
        "lateness_overall": transforms.lateness_stats(messages, by=()),
        "lateness_by_queue": transforms.lateness_stats(messages, by=("queue",)),
        "lateness_by_hour": transforms.lateness_stats(messages),
        "attempts": transforms.attempts_histogram(messages),
        "failures": transforms.top_failures(messages, args.top_errors),
        "stuck": transforms.stuck_messages(messages, now=now, older_than=timedelta(seconds=args.stuck_after)),
        "lateness_histogram": transforms.lateness_histogram(messages),
        "deliveries_over_time": transforms.deliveries_over_time(messages, unit),
        "schedules": transforms.schedule_figures(messages, args.on_time_within),
    }
    if args.due_after:
        tables["lateness_split"] = transforms.lateness_split(messages, args.due_after)
    out = io.Output(args.out, located)
    collected: dict[str, list[Any]] = {}
    for name, frame in tables.items():
        # Written twice and read back for report.md: computed once.
        frame.persist(StorageLevel.MEMORY_AND_DISK)
        out.write_table(frame, name)
        limit = report_md.MAX_ROWS if name in ("stuck", "status_by_hour", "lateness_by_hour") else None
        collected[name] = (frame.limit(limit) if limit else frame).collect()
    stuck_total = tables["stuck"].count()
    for frame in tables.values():
        frame.unpersist()
    messages.unpersist()

    out.write_bytes("charts/lateness.png", charts.lateness_histogram(collected["lateness_histogram"]))
    out.write_bytes("charts/deliveries.png", charts.deliveries_over_time(collected["deliveries_over_time"], unit))
    document = report_md.Report(
        source=source,
        now=now,
        messages=count,
        charts=[("Lateness distribution", "charts/lateness.png"), ("Deliveries over time", "charts/deliveries.png")],
        sections=_sections(tables, collected, stuck_total, args),
    )
    out.write_bytes("report.md", report_md.render(document).encode())
    overall = collected["lateness_overall"][0].asDict() if collected["lateness_overall"] else {}
    summary = {
        "source": source,
        "now": format_rfc3339(now),
        "messages": count,
        "status": _status_totals(collected["status_by_queue"]),
        "lateness_s": overall,
        "stuck": stuck_total,
        "schedules": _schedule_totals(collected["schedules"]),
        **({"lateness_split_s": _split(collected["lateness_split"], args.due_after)} if args.due_after else {}),
        "out": args.out,
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    out.write_json("summary.json", summary)
    return summary


def _sections(
    tables: dict[str, DataFrame], collected: dict[str, list[Any]], stuck_total: int, args: argparse.Namespace
) -> list[Section]:
    def section(title: str, name: str, note: str = "", total: int | None = None) -> Section:
        return Section(title, collected[name], tables[name].columns, note, total)

    split = [] if not args.due_after else [
        section(f"Lateness, due at or after {format_rfc3339(args.due_after)} and before (seconds)", "lateness_split")
    ]
    return [
        section("Messages by status and queue", "status_by_queue"),
        section("Lateness, all queues (seconds)", "lateness_overall", LATENESS_NOTE),
        *split,
        section("Lateness by queue (seconds)", "lateness_by_queue"),
        section("Lateness by queue and hour of due time (seconds)", "lateness_by_hour"),
        section("Messages by status, queue and hour of due time", "status_by_hour"),
        section("Attempts per message", "attempts"),
        section(f"Top {args.top_errors} failure reasons per queue", "failures", "The last_error of each message."),
        section(
            "Schedules",
            "schedules",
            f"Occurrences per schedule; on time: delivered within {args.on_time_within:g} s of the occurrence time "
            "(retries included). Failed counts failed and expired ones; cancelled ones were planned before a "
            "pause, replace or delete.",
        ),
        section(
            "Stuck messages",
            "stuck",
            f"Pending or delivering more than {args.stuck_after:g} s after their due time.",
            stuck_total,
        ),
    ]


def _split(rows: Sequence[Any], at: datetime) -> dict[str, Any]:
    """summary.json's lateness either side of `--due-after`."""
    sides = {row["due"]: {k: v for k, v in row.asDict().items() if k != "due"} for row in rows}
    return {"at": format_rfc3339(at), **sides}


def _status_totals(rows: Sequence[Any]) -> dict[str, int]:
    totals = {status: 0 for status in transforms.STATUSES}
    for row in rows:
        for status in transforms.STATUSES:
            totals[status] += row[status]
    return totals


def _schedule_totals(rows: Sequence[Any]) -> dict[str, int]:
    fields = ("occurrences", "on_time", "late", "failed")
    return {"schedules": len(rows), **{name: sum(row[name] for row in rows) for name in fields}}


def _unit(messages: DataFrame) -> str:
    """Minutes for a short run, hours for days of data, days beyond that."""
    span = (
        messages.where(F.col("delivered_at").isNotNull())
        .agg((F.max(F.unix_millis("delivered_at")) - F.min(F.unix_millis("delivered_at"))).alias("ms"))
        .first()
    )
    ms = span["ms"] if span and span["ms"] is not None else 0
    return "minute" if ms < 6 * 3600_000 else "hour" if ms < 14 * 86400_000 else "day"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run_job(
        "hourglass-report",
        args.master,
        lambda spark: run(spark, args),
        lambda s: f"report of {s['messages']} messages in {s['out']}/report.md ({s['elapsed_s']} s)",
    )


if __name__ == "__main__":
    sys.exit(main())
