"""Bulk scheduling end to end: a file in, messages in the deployed stack's table and timer queue."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hourglass.adapters.items import dedup_key, message_key
from hourglass.adapters.store import Store
from hourglass.core import ids, message_partitions
from hourglass.core.schedule import sweep_keys
from hourglass.core.timestamps import format_rfc3339, from_ms, parse_rfc3339
from pyspark.sql import SparkSession

from pipeline import schedule_job
from tests.pipeline.conftest import Stack

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")]

HEADER = ["queue", "body", "delay", "deliver_at", "dedup_id"]
# Two days ahead, written with an offset other than Z.
ORDER_3_DUE = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
ORDER_3_AT = ORDER_3_DUE.astimezone(timezone(timedelta(hours=1))).isoformat()


@dataclass(frozen=True)
class Run:
    summary: dict[str, Any]
    rejects: Path


def run_job(spark: SparkSession, stack: Stack, source: Path, tmp: Path) -> Run:
    rejects = tmp / f"{source.stem}-rejects.csv"
    args = schedule_job.parser().parse_args(
        [
            *("--input", str(source), "--rejects", str(rejects), "--summary", str(tmp / "summary.json")),
            *("--endpoint-url", stack.endpoint, "--region", "us-east-1", "--progress-interval", "1"),
        ]
    )
    return Run(schedule_job.run(spark, args), rejects)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Path:
    stack.create_queue("bulk-orders")
    stack.create_queue("bulk-emails", {"default_delay": 3600})
    path = tmp_path_factory.mktemp("in") / "orders.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(HEADER)
        writer.writerows(
            [
                ["bulk-orders", '{"n": 1}', "0", "", ""],  # 1: due now, handed off
                ["bulk-orders", "plain text", "7200", "", ""],  # 2: waits for the sweeper
                ["bulk-orders", '{"n": 3}', "", ORDER_3_AT, "order-3"],  # 3
                ["bulk-orders", '{"n": 4}', "", ORDER_3_AT, "order-3"],  # 4: same dedup id as 3
                ["bulk-emails", "[1, 2]", "", "", ""],  # 5: the queue's default_delay
                ["bulk-emails", "{}", "0", "", ""],  # 6: handed off
                ["no-such-queue", "{}", "1", "", ""],  # 7
                ["bulk-orders", "{}", "soon", "", ""],  # 8
                ["bulk-orders", "{}", "1", ORDER_3_AT, ""],  # 9
            ]
        )
    return path


@pytest.fixture(scope="module")
def first(spark: SparkSession, stack: Stack, source: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_job(spark, stack, source, tmp_path_factory.mktemp("first"))


def item(stack: Stack, queue: str, key: str) -> dict[str, Any] | None:
    got = stack.deployment.client("dynamodb").get_item(
        TableName=stack.deployment.table, Key=message_key(queue, ids.deterministic_id(queue, key)), ConsistentRead=True
    )
    return got.get("Item")


def timer_bodies(stack: Stack) -> Iterator[str]:
    sqs = stack.deployment.client("sqs")
    while True:
        got = sqs.receive_message(QueueUrl=stack.deployment.timer_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        if not got.get("Messages"):
            return
        yield from (m["Body"] for m in got["Messages"])


def test_summary_counts_every_row_once(first: Run) -> None:
    counts = {k: first.summary[k] for k in ("read", "scheduled", "duplicate", "rejected", "handed_off", "swept")}

    assert counts == {"read": 9, "scheduled": 5, "duplicate": 1, "rejected": 3, "handed_off": 2, "swept": 3}


def test_summary_is_written_as_json(first: Run) -> None:
    written = json.loads((first.rejects.parent / "summary.json").read_text())

    assert written["scheduled"] == 5 and written["elapsed_s"] > 0


def test_later_rows_wait_in_the_due_index(first: Run, stack: Stack) -> None:
    stored = item(stack, "bulk-orders", "row:orders.csv:2")

    assert stored is not None
    message_id, due = stored["id"]["S"], from_ms(int(stored["due_at"]["N"]))
    assert due == parse_rfc3339(first.summary["now"]) + timedelta(seconds=7200)
    keys = sweep_keys(message_id, due, shards=8, bucket_seconds=60)
    assert (stored["status"]["S"], stored["sweep_pk"]["S"], stored["sweep_sk"]["S"]) == ("pending", keys.pk, keys.sk)


def test_queue_default_delay_applies(first: Run, stack: Stack) -> None:
    stored = item(stack, "bulk-emails", "row:orders.csv:5")

    assert stored is not None
    assert from_ms(int(stored["due_at"]["N"])) == parse_rfc3339(first.summary["now"]) + timedelta(seconds=3600)


def test_due_rows_are_handed_to_the_timer_queue_without_index_keys(first: Run, stack: Stack) -> None:
    handed = [item(stack, "bulk-orders", "row:orders.csv:1"), item(stack, "bulk-emails", "row:orders.csv:6")]

    bodies = "\n".join(timer_bodies(stack))
    for stored in handed:
        assert stored is not None and "sweep_pk" not in stored
        assert stored["id"]["S"] in bodies


def test_a_dedup_id_makes_one_message_and_a_dedup_record(first: Run, stack: Stack) -> None:
    stored = item(stack, "bulk-orders", "order-3")
    record = stack.deployment.client("dynamodb").get_item(
        TableName=stack.deployment.table, Key=dedup_key("bulk-orders", "order-3"), ConsistentRead=True
    )["Item"]

    assert stored is not None and json.loads(stored["body"]["S"]) == {"n": 3}
    assert from_ms(int(stored["due_at"]["N"])) == ORDER_3_DUE
    assert record["message_id"]["S"] == stored["id"]["S"]


def test_bad_rows_go_to_the_rejects_file_with_row_and_reason(first: Run) -> None:
    with first.rejects.open() as rejects:
        rows = list(csv.DictReader(rejects))

    assert rows == [
        {"row": "7", "queue": "no-such-queue", "reason": "queue: queue no-such-queue does not exist"},
        {"row": "8", "queue": "bulk-orders", "reason": "delay: must be a number"},
        {"row": "9", "queue": "bulk-orders", "reason": "delay: delay and deliver_at are mutually exclusive"},
    ]


def test_rerun_schedules_nothing_twice(
    first: Run, spark: SparkSession, stack: Stack, source: Path, tmp_path: Path
) -> None:
    again = run_job(spark, stack, source, tmp_path)

    assert {k: again.summary[k] for k in ("scheduled", "duplicate", "rejected")} == {
        "scheduled": 0,
        "duplicate": 6,
        "rejected": 3,
    }


def test_json_lines_share_dedup_ids_with_earlier_files(
    first: Run, spark: SparkSession, stack: Stack, tmp_path: Path
) -> None:
    due = format_rfc3339(parse_rfc3339(first.summary["now"]) + timedelta(days=2))
    lines = [
        {"queue": "bulk-orders", "body": {"n": 30}, "deliver_at": due, "dedup_id": "order-3"},
        {"queue": "bulk-orders", "body": "new", "delay": 86400, "dedup_id": "order-9"},
        {"queue": "bulk-orders", "body": 1, "delay": "5"},
    ]
    source = tmp_path / "more.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))

    run = run_job(spark, stack, source, tmp_path)

    assert {k: run.summary[k] for k in ("read", "scheduled", "duplicate", "rejected")} == {
        "read": 3,
        "scheduled": 1,
        "duplicate": 1,
        "rejected": 1,
    }
    assert item(stack, "bulk-orders", "order-9") is not None


def test_a_load_of_a_busy_queues_share_spreads_it_and_runs_again_once(
    spark: SparkSession, stack: Stack, tmp_path: Path
) -> None:
    """A load giving one queue SPREAD_AT rows spreads it before writing: its messages go to the spread partitions,
    with ids planned from the input alone, so a second run finds every one (`core/message_partitions.py`)."""
    stack.create_queue("bulk-busy")
    source = tmp_path / "busy.csv"
    with source.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(HEADER)
        writer.writerows(["bulk-busy", "{}", "7200", "", ""] for _ in range(message_partitions.SPREAD_AT - 1))
        writer.writerow(["bulk-busy", "{}", "7200", "", "busy-1"])
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first_run = run_job(spark, stack, source, tmp_path / "one")
    again = run_job(spark, stack, source, tmp_path / "two")
    store = Store(stack.deployment.table, client=stack.deployment.client("dynamodb"))
    queue = store.get_queue("bulk-busy", consistent=True)
    in_own, _ = store.list_messages("bulk-busy", status=None, limit=10, cursor=None)
    assert queue is not None and queue.partitions == message_partitions.PARTITIONS
    assert (first_run.summary["scheduled"], again.summary["scheduled"]) == (message_partitions.SPREAD_AT, 0)
    assert in_own == [] and again.summary["duplicate"] == message_partitions.SPREAD_AT
