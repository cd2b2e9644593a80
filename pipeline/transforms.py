"""Pure DataFrame -> DataFrame transforms of both jobs: documents, plans, rejects and report tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from hourglass.core.model import Queue, Status
from hourglass.core.timestamps import to_ms
from hourglass.settings import Settings
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline import cells
from pipeline.planner import STRICT, KeySettings, Planner

PLAN_FIELDS = T.StructType(
    [
        T.StructField("queue", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("dedup_id", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("due_ms", T.LongType()),
        T.StructField("sweep_pk", T.StringType()),
        T.StructField("sweep_sk", T.StringType()),
        T.StructField("item", T.StringType()),
        T.StructField("error", T.StringType()),
    ]
)
STATUSES: list[str] = [status.value for status in Status]
# Seconds; the lateness histogram's bin edges (the last bin is open-ended).
LATENESS_EDGES = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
QUANTILES = (0.5, 0.9, 0.99)


# ------------------------------------------------------------------------------ scheduling


def documents_from_cells(table: DataFrame) -> DataFrame:
    """`row` (and `key`) + the cell columns of a CSV/Parquet input -> `row`, `key`, `doc` (JSON of the message)."""
    present = [name for name in cells.COLUMNS if name in table.columns]

    @F.udf(T.StringType(), useArrow=False)  # type: ignore[misc]
    def to_document(values: Any) -> str:
        return cells.document(values.asDict())

    return table.select("row", *_key(table), to_document(F.struct(*present)).alias("doc"))


def documents_from_lines(lines: DataFrame) -> DataFrame:
    """`row`, `value` (one JSON document per line) -> `row`, `key`, `doc`; blank lines are not rows."""
    return lines.where(F.trim("value") != "").select("row", *_key(lines), F.col("value").alias("doc"))


def _key(table: DataFrame) -> list[Column]:
    """The row's name in ids (io.with_row_numbers), when the input has one."""
    return [F.col("key")] if "key" in table.columns else []


def queue_counts_from_cells(table: DataFrame) -> DataFrame:
    """`queue`, `count`: the distinct `queue` cells and their rows (unchecked: the planner validates them)."""
    return table.select("queue").where("queue IS NOT NULL").groupBy("queue").count()


def queue_counts_from_lines(lines: DataFrame) -> DataFrame:
    """`queue`, `count`: the distinct `queue` values of JSON lines and their lines (unchecked: the planner
    validates them)."""
    named = lines.select(F.get_json_object("value", "$.queue").alias("queue")).where("queue IS NOT NULL")
    return named.groupBy("queue").count()


def plan_messages(
    documents: DataFrame,
    queues: Mapping[str, Queue],
    *,
    now: datetime,
    source: str,
    keys: KeySettings = KeySettings(),
    stack: Settings = STRICT,
    spread: frozenset[str] = frozenset(),
) -> DataFrame:
    """`row`, `doc` (and `key`) -> one planned message or reject reason (`error`) per row.

    `queues` is broadcast once; every row is validated exactly as a REST request would be. The messages of the
    queues in `spread` get spread ids (the load spreads those queues).
    """
    shared = documents.sparkSession.sparkContext.broadcast(dict(queues))
    planners: dict[int, Planner] = {}

    @F.udf(PLAN_FIELDS, useArrow=False)  # type: ignore[misc]
    def plan(row: int, doc: str | None, key: str | None) -> Any:
        # Built once per task (not per row): the queue settings and the resolved-host cache are reused.
        planner = planners.get(0)
        if planner is None:
            planner = Planner(shared.value, now, source, keys, stack, spread)
            planners[0] = planner
        return planner.plan(row, doc, key)

    key = F.col("key") if "key" in documents.columns else F.lit(None).cast("string")
    planned = documents.select("row", plan("row", "doc", key).alias("p")).select("row", "p.*")
    return planned.withColumn("due_at", F.timestamp_millis("due_ms"))


def rejects(plan: DataFrame) -> DataFrame:
    """The rows that failed validation: `row`, `queue`, `reason`."""
    return plan.where(F.col("error").isNotNull()).select("row", "queue", F.col("error").alias("reason"))


def accepted(plan: DataFrame) -> DataFrame:
    return plan.where(F.col("error").isNull()).drop("error")


def mark_repeats(messages: DataFrame) -> DataFrame:
    """Adds `repeat`: true for every row after the first that planned the same message id.

    Two rows with one `dedup_id` make one message, as two REST posts would.
    """
    first = Window.partitionBy("id").orderBy("row")
    return messages.withColumn("repeat", F.row_number().over(first) > 1)


# --------------------------------------------------------------------------------- report


def with_lateness(messages: DataFrame) -> DataFrame:
    """Adds `hour` (of the due time) and `lateness_s` (delivered only): delivered_at minus the moment
    the message became due, which is its due time, or when it was stored if that came later (a
    deliver_at in the past, a bulk row that fell due while the job was still writing)."""
    became_due = F.greatest(F.col("due_at"), F.col("created_at"))
    millis = F.unix_millis("delivered_at") - F.unix_millis(became_due)
    delivered = F.col("status") == Status.DELIVERED.value
    return messages.withColumn("hour", F.date_trunc("hour", "due_at")).withColumn(
        "lateness_s", F.when(delivered, millis / 1000.0)
    )


def status_counts(messages: DataFrame, by: Sequence[str] = ("queue", "hour")) -> DataFrame:
    """Messages per status (one column each, every status present) and in total."""
    every_status: list[Any] = list(STATUSES)  # pivot on a fixed list: columns do not depend on the data
    counts = messages.groupBy(*by).pivot("status", every_status).count().fillna(0, subset=STATUSES)
    total = sum((F.col(s) for s in STATUSES), F.lit(0))
    return counts.withColumn("total", total.cast("long")).orderBy(*by)


def lateness_stats(messages: DataFrame, by: Sequence[str] = ("queue", "hour")) -> DataFrame:
    """Delivered messages and their lateness p50/p90/p99/max in seconds."""
    delivered = messages.where(F.col("lateness_s").isNotNull())
    quantiles = F.percentile_approx("lateness_s", list(QUANTILES), 10000)
    stats = delivered.groupBy(*by).agg(
        F.count("*").alias("delivered"), quantiles.alias("q"), F.max("lateness_s").alias("max_s")
    )
    columns = stats.select(
        *by,
        "delivered",
        *(F.col("q")[i].alias(f"p{round(q * 100)}_s") for i, q in enumerate(QUANTILES)),
        "max_s",
    )
    return columns.orderBy(*by) if by else columns


def lateness_split(messages: DataFrame, at: datetime) -> DataFrame:
    """`lateness_stats` of the messages due at or after `at` (e.g. when a bulk load finished) and of the rest:
    a row each, `due` "at or after" / "before"."""
    side = F.when(F.unix_millis("due_at") >= F.lit(to_ms(at)), "at or after").otherwise("before")
    return lateness_stats(messages.withColumn("due", side), by=("due",))


def attempts_histogram(messages: DataFrame) -> DataFrame:
    return messages.groupBy("queue", "attempts").agg(F.count("*").alias("messages")).orderBy("queue", "attempts")


def top_failures(messages: DataFrame, limit: int = 5) -> DataFrame:
    """The most frequent `last_error` texts per queue, with how many messages carry each. A delivered
    message failed nothing (exports made before v1.2 may still carry an earlier attempt's error)."""
    counts = (
        messages.where(F.col("last_error").isNotNull() & (F.col("status") != Status.DELIVERED.value))
        .groupBy("queue", "last_error")
        .agg(F.count("*").alias("messages"))
    )
    rank = F.row_number().over(Window.partitionBy("queue").orderBy(F.desc("messages"), "last_error"))
    return counts.withColumn("rank", rank).where(F.col("rank") <= limit).orderBy("queue", "rank")


def stuck_messages(messages: DataFrame, *, now: datetime, older_than: timedelta) -> DataFrame:
    """Pending or delivering messages whose due time passed more than `older_than` before `now`."""
    cutoff = now - older_than
    waiting = F.col("status").isin(Status.PENDING.value, Status.DELIVERING.value)
    overdue_s = (F.lit(int(now.timestamp() * 1000)) - F.unix_millis("due_at")) / 1000.0
    return (
        messages.where(waiting & (F.col("due_at") < F.lit(cutoff)))
        .select("queue", "id", "status", "due_at", "attempts", "last_error", overdue_s.alias("overdue_s"))
        .orderBy("due_at", "queue", "id")
    )


def lateness_histogram(messages: DataFrame, edges: Sequence[float] = LATENESS_EDGES) -> DataFrame:
    """Delivered messages per lateness bin [lower, upper); every bin present, in order."""
    lateness = F.col("lateness_s")
    index: Column = F.lit(0)
    for i, edge in enumerate(edges[1:], start=1):
        index = F.when(lateness >= edge, F.lit(i)).otherwise(index)
    counts = messages.where(lateness.isNotNull()).groupBy(index.alias("bin")).agg(F.count("*").alias("messages"))
    bins = messages.sparkSession.createDataFrame(
        [(i, float(low), float(edges[i + 1]) if i + 1 < len(edges) else None) for i, low in enumerate(edges)],
        "bin INT, lower_s DOUBLE, upper_s DOUBLE",
    )
    joined = bins.join(counts, "bin", "left").fillna(0, subset=["messages"])
    return joined.select("bin", "lower_s", "upper_s", F.col("messages").cast("long")).orderBy("bin")


def deliveries_over_time(messages: DataFrame, unit: str = "hour") -> DataFrame:
    """Delivered messages per queue and `unit` ("minute", "hour", "day") of their delivery time."""
    delivered = messages.where(F.col("status") == Status.DELIVERED.value)
    period = F.date_trunc(unit, "delivered_at").alias("period")
    return delivered.groupBy("queue", period).agg(F.count("*").alias("delivered")).orderBy("period", "queue")


def schedule_figures(messages: DataFrame, on_time_within: float = 1.0) -> DataFrame:
    """Per schedule: its occurrences, delivered on time / late, failed (or expired), cancelled, waiting.

    An occurrence is on time when it was delivered at most `on_time_within` seconds after its
    occurrence time (or after it was stored, if later); retries do not move that time.
    """
    occurrences = messages.where(F.col("schedule").isNotNull())
    became_due = F.greatest(F.coalesce(F.col("occurrence_at"), F.col("due_at")), F.col("created_at"))
    late_s = (F.unix_millis("delivered_at") - F.unix_millis(became_due)) / 1000.0
    status = F.col("status")
    delivered = status == Status.DELIVERED.value

    def count(condition: Column) -> Column:
        return F.count(F.when(condition, True))

    figures = occurrences.groupBy("queue", "schedule").agg(
        F.count("*").alias("occurrences"),
        count(delivered & (late_s <= on_time_within)).alias("on_time"),
        count(delivered & (late_s > on_time_within)).alias("late"),
        count(status.isin(Status.FAILED.value, Status.EXPIRED.value)).alias("failed"),
        count(status == Status.CANCELLED.value).alias("cancelled"),
        count(status.isin(Status.PENDING.value, Status.DELIVERING.value)).alias("waiting"),
        F.max(F.when(delivered, late_s)).alias("max_late_s"),
    )
    return figures.orderBy("queue", "schedule")
