"""The pure transforms of both jobs on small inline data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core import ids, schedule, validation
from hourglass.core.model import Queue
from hourglass.core.timestamps import to_ms
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from pipeline import io, records, transforms

pytestmark = pytest.mark.spark

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
QUEUES = {"orders": Queue("orders", validation.queue_settings({"max_delay": 3600}), NOW - timedelta(days=1))}
CELLS = "row LONG, queue STRING, body STRING, delay STRING, deliver_at STRING, ttl STRING, dedup_id STRING"


def documents(spark: SparkSession, *rows: tuple[object, ...]) -> DataFrame:
    return transforms.documents_from_cells(spark.createDataFrame(list(rows), CELLS))


def plan(spark: SparkSession, *rows: tuple[object, ...]) -> DataFrame:
    return transforms.plan_messages(documents(spark, *rows), QUEUES, now=NOW, source="in.csv")


def test_cells_become_the_documents_the_api_would_get(spark: SparkSession) -> None:
    got = documents(
        spark,
        (1, "orders", '{"a": 1}', "30", None, None, None),
        (2, "orders", "plain text", None, "2026-11-21T11:00:00Z", "60.5", "o-2"),
        (3, "orders", "42", "soon", None, None, None),
    )

    expected = [
        Row(row=1, doc='{"queue":"orders","body":{"a":1},"delay":30}'),
        Row(
            row=2,
            doc='{"queue":"orders","body":"plain text","deliver_at":"2026-11-21T11:00:00Z",'
            '"ttl":60.5,"dedup_id":"o-2"}',
        ),
        Row(row=3, doc='{"queue":"orders","body":42,"delay":"soon"}'),
    ]
    assertDataFrameEqual(got, expected)


def test_valid_row_gets_a_deterministic_id_and_due_index_keys(spark: SparkSession) -> None:
    got = plan(spark, (7, "orders", "{}", "120", None, None, None)).select(
        "row", "queue", "id", "status", "due_ms", "sweep_pk", "sweep_sk", "error"
    )

    message_id = ids.deterministic_id("orders", "row:in.csv:7")
    due = NOW + timedelta(seconds=120)
    keys = schedule.sweep_keys(message_id, due, shards=8, bucket_seconds=60)
    assertDataFrameEqual(got, [Row(7, "orders", message_id, "pending", to_ms(due), keys.pk, keys.sk, None)])


def test_dedup_id_names_the_message_instead_of_the_row(spark: SparkSession) -> None:
    got = plan(
        spark, (1, "orders", "{}", None, None, None, "order-42"), (9, "orders", "{}", None, None, None, "order-42")
    )

    expected_id = ids.deterministic_id("orders", "order-42")
    assertDataFrameEqual(got.select("row", "id"), [Row(1, expected_id), Row(9, expected_id)])


def test_item_is_the_lambdas_message_item(spark: SparkSession) -> None:
    (row,) = plan(spark, (1, "orders", '{"x": [1, 2]}', "5", None, "60", None)).collect()

    item = json.loads(row.item)
    record = records.record(item)
    assert record[:3] == ("orders", row.id, "pending")
    assert item["body"] == {"S": '{"x":[1,2]}'}
    assert item["expires_at"] == {"N": str(to_ms(NOW + timedelta(seconds=60)))}
    assert "sweep_pk" not in item


def test_bad_rows_are_rejected_with_the_api_reason(spark: SparkSession) -> None:
    got = transforms.rejects(
        plan(
            spark,
            (1, "orders", "{}", "-1", None, None, None),
            (2, "nosuch", "{}", "1", None, None, None),
            (3, "orders", "{}", "7200", None, None, None),
            (4, "orders", None, "1", None, None, None),
            (5, "orders", "{}", "1", None, None, None),
        )
    )

    assertDataFrameEqual(
        got,
        [
            Row(1, "orders", "delay: must be between 0 and 315360000"),
            Row(2, "nosuch", "queue: queue nosuch does not exist"),
            Row(3, "orders", "delay: is beyond the queue's max_delay of 3600 s"),
            Row(4, "orders", "body: is required"),
        ],
    )


def test_a_message_due_after_its_expiry_is_planned_expired_without_keys(spark: SparkSession) -> None:
    got = plan(spark, (1, "orders", "{}", "600", None, "60", None)).select("status", "sweep_pk")

    assertDataFrameEqual(got, [Row("expired", None)])


def test_unparseable_json_line_is_rejected(spark: SparkSession) -> None:
    lines = spark.createDataFrame(
        [(1, '{"queue": "orders", "body": 1}'), (2, "{nope"), (3, "  ")], "row LONG, value STRING"
    )

    got = transforms.plan_messages(transforms.documents_from_lines(lines), QUEUES, now=NOW, source="in.jsonl")

    assertDataFrameEqual(
        got.select("row", "error"),
        [
            Row(1, None),
            Row(
                2,
                "row: is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
            ),
        ],
    )


def test_repeats_of_an_id_are_marked_after_the_first_row(spark: SparkSession) -> None:
    rows = spark.createDataFrame([(5, "a"), (2, "a"), (3, "b")], "row LONG, id STRING")

    assertDataFrameEqual(transforms.mark_repeats(rows), [Row(5, "a", True), Row(2, "a", False), Row(3, "b", False)])


def test_row_numbers_follow_the_input_order_across_partitions(spark: SparkSession) -> None:
    ordered = spark.sparkContext.parallelize([(c,) for c in "abcdefg"], 3)

    numbered = io.with_row_numbers(spark.createDataFrame(ordered, "v STRING"), "in.csv")

    assert numbered.total == 7
    assertDataFrameEqual(numbered.rows, [Row(i + 1, f"in.csv:{i + 1}", c) for i, c in enumerate("abcdefg")])


# ---------------------------------------------------------------------------------- report

MESSAGES = (
    "queue STRING, id STRING, status STRING, due_at TIMESTAMP, delivered_at TIMESTAMP, attempts INT, "
    "last_error STRING, created_at TIMESTAMP"
)


def messages(spark: SparkSession, *rows: tuple[object, ...]) -> DataFrame:
    """Rows without a created_at were stored a minute before their due time."""
    full = [row if len(row) == 8 else (*row, row[3] - timedelta(minutes=1)) for row in rows]
    return transforms.with_lateness(spark.createDataFrame(full, MESSAGES))


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_lateness_percentiles_per_queue_and_hour(spark: SparkSession) -> None:
    rows = [("q", f"m{i}", "delivered", at(i), at(i + 0.1 * (i + 1)), 1, None) for i in range(10)]
    rows.append(("q", "late", "delivered", at(4000), at(4002), 1, None))
    rows.append(("q", "waiting", "pending", at(10), None, 0, None))

    got = transforms.lateness_stats(messages(spark, *rows))

    hour = datetime(2026, 11, 21, 10, 0)
    assertDataFrameEqual(
        got,
        [Row("q", hour, 10, 0.5, 0.9, 1.0, 1.0), Row("q", hour + timedelta(hours=1), 1, 2.0, 2.0, 2.0, 2.0)],
    )


def test_lateness_of_a_message_stored_after_its_due_time_counts_from_when_it_was_stored(spark: SparkSession) -> None:
    stored_late = ("q", "past", "delivered", at(0), at(62.5), 1, None, at(60))

    got = transforms.lateness_stats(messages(spark, stored_late), by=())

    assertDataFrameEqual(got, [Row(delivered=1, p50_s=2.5, p90_s=2.5, p99_s=2.5, max_s=2.5)])


def test_status_counts_have_a_column_for_every_status(spark: SparkSession) -> None:
    got = transforms.status_counts(
        messages(
            spark, ("q", "a", "delivered", at(0), at(1), 1, None), ("q", "b", "failed", at(0), None, 5, "HTTP 500")
        ),
        by=("queue",),
    )

    assertDataFrameEqual(
        got, [Row(queue="q", pending=0, delivering=0, delivered=1, failed=1, cancelled=0, expired=0, total=2)]
    )


def test_top_failures_rank_the_most_common_last_errors(spark: SparkSession) -> None:
    errors = ["HTTP 500", "HTTP 500", "timeout", "HTTP 404", "HTTP 500", "timeout"]
    rows = [("q", f"m{i}", "failed", at(0), None, 5, e) for i, e in enumerate(errors)]

    got = transforms.top_failures(messages(spark, *rows), limit=2)

    assertDataFrameEqual(got, [Row("q", "HTTP 500", 3, 1), Row("q", "timeout", 2, 2)])


def test_top_failures_leave_out_delivered_messages(spark: SparkSession) -> None:
    """An export made before v1.2 may carry an earlier attempt's error on a delivered message."""
    rows = [
        ("q", "ok", "delivered", at(0), at(3), 2, "ConnectionRefusedError"),
        ("q", "x", "failed", at(0), None, 5, "HTTP 500"),
    ]

    got = transforms.top_failures(messages(spark, *rows))

    assertDataFrameEqual(got, [Row("q", "HTTP 500", 1, 1)])


def test_stuck_messages_are_waiting_long_after_their_due_time(spark: SparkSession) -> None:
    rows = [
        ("q", "old-pending", "pending", at(-3600), None, 0, None),
        ("q", "old-delivering", "delivering", at(-700), None, 1, None),
        ("q", "recent", "pending", at(-300), None, 0, None),
        ("q", "done", "delivered", at(-3600), at(-3599), 1, None),
    ]

    got = transforms.stuck_messages(messages(spark, *rows), now=NOW, older_than=timedelta(minutes=10))

    assert [(r.id, r.overdue_s) for r in got.collect()] == [("old-pending", 3600.0), ("old-delivering", 700.0)]


def test_lateness_histogram_has_every_bin(spark: SparkSession) -> None:
    rows = [("q", f"m{i}", "delivered", at(0), at(s), 1, None) for i, s in enumerate([0.05, 0.7, 0.8, 7200])]

    got = transforms.lateness_histogram(messages(spark, *rows), edges=(0.0, 0.5, 1.0, 60.0))

    assertDataFrameEqual(
        got, [Row(0, 0.0, 0.5, 1), Row(1, 0.5, 1.0, 2), Row(2, 1.0, 60.0, 0), Row(3, 60.0, None, 1)], checkRowOrder=True
    )


def test_attempts_histogram(spark: SparkSession) -> None:
    rows = [("q", f"m{i}", "delivered", at(0), at(1), n, None) for i, n in enumerate([1, 1, 3])]

    assertDataFrameEqual(transforms.attempts_histogram(messages(spark, *rows)), [Row("q", 1, 2), Row("q", 3, 1)])


OCCURRENCES = (
    "queue STRING, schedule STRING, status STRING, occurrence_at TIMESTAMP, due_at TIMESTAMP, "
    "delivered_at TIMESTAMP, created_at TIMESTAMP"
)


def test_schedule_figures_count_each_schedules_occurrences_by_outcome(spark: SparkSession) -> None:
    def occurrence(name: str, status: str, k: int, late: float | None = None, retried: float = 0) -> tuple[object, ...]:
        delivered = None if late is None else at(60 * k + late)
        return ("q", name, status, at(60 * k), at(60 * k + retried), delivered, at(60 * k - 60))

    rows = [
        occurrence("tick", "delivered", 0, late=0.2),
        occurrence("tick", "delivered", 1, late=1.0),
        occurrence("tick", "delivered", 2, late=4.0),
        # retried 30 s later and delivered 0.1 s after the retry: late by the occurrence's own time
        occurrence("tick", "delivered", 3, late=30.1, retried=30),
        occurrence("tick", "failed", 4),
        occurrence("tick", "expired", 5),
        occurrence("tick", "cancelled", 6),
        occurrence("tick", "pending", 7),
        occurrence("daily", "delivered", 0, late=0.5),
        ("q", None, "delivered", None, at(0), at(9), at(-60)),
    ]
    frame = spark.createDataFrame(rows, OCCURRENCES)

    got = transforms.schedule_figures(frame, on_time_within=1.0)

    assertDataFrameEqual(
        got,
        [
            Row("q", "daily", 1, 1, 0, 0, 0, 0, 0.5),
            Row("q", "tick", 8, 2, 2, 2, 1, 1, 30.1),
        ],
    )
