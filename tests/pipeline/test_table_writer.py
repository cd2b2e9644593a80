"""The bulk writer against moto's in-process DynamoDB: duplicates, dedup records, hand-off, throttling."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import body_key, dedup_key, dedup_to_item, message_key
from hourglass.adapters.message_storage import MessageStorage
from hourglass.adapters.timer_queue import Scheduled
from hourglass.core import validation
from hourglass.core.model import Queue
from hourglass.errors import TimerQueueError
from hourglass.service.rest import full_queue_doc
from moto import mock_aws

from pipeline import table
from pipeline.deployment import Deployment
from pipeline.planner import Planner
from pipeline.table import Planned, TableWriter, WriteBudget, WriteSettings
from tests.integration.conftest import create_table

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
QUEUES = {"orders": Queue("orders", validation.queue_settings({}), NOW)}


class Timers:
    def __init__(self, refuse: bool = False) -> None:
        self.sent: list[Scheduled] = []
        self.refuse = refuse

    def send_all(self, items: list[Scheduled]) -> None:
        if self.refuse:
            raise TimerQueueError("refused")
        self.sent.extend(items)


class Throttled:
    """A DynamoDB client that leaves half of each batch unprocessed for the first `times` calls."""

    def __init__(self, client: Any, times: int) -> None:
        self.client = client
        self.times = times

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        if self.times <= 0:
            return dict(self.client.batch_write_item(RequestItems=RequestItems))
        self.times -= 1
        ((table, requests),) = RequestItems.items()
        half = len(requests) // 2
        self.client.batch_write_item(RequestItems={table: requests[:half]})
        return {"UnprocessedItems": {table: requests[half:]}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb)
        yield ddb


def planned(row: int, **doc: object) -> Planned:
    fields = Planner(QUEUES, NOW, "in.csv").plan(row, json.dumps({"queue": "orders", "body": row, **doc}))
    assert fields[-1] is None, fields[-1]
    return Planned(*fields[:-1])  # type: ignore[arg-type]


def writer(client: Any, timers: Timers | None = None, sleeps: list[float] | None = None) -> TableWriter:
    return TableWriter(
        Deployment(table="messages"),
        NOW,
        clock=lambda: NOW,
        sleep=(sleeps if sleeps is not None else []).append,
        client=client,
        timers=timers or Timers(),
    )


def stored(client: Any, row: Planned) -> dict[str, Any] | None:
    return client.get_item(TableName="messages", Key=message_key(row.queue, row.id)).get("Item")


def test_unprocessed_items_are_retried_with_backoff_until_stored(client: Any) -> None:
    rows = [planned(i, delay=3600) for i in range(1, 31)]
    sleeps: list[float] = []

    counts = writer(Throttled(client, times=3), sleeps=sleeps).write_all(rows)

    assert counts.scheduled == 30
    assert all(stored(client, row) is not None for row in rows)
    assert len(sleeps) == 3


def test_a_bulk_load_adds_its_rows_to_the_queue_counts(client: Any) -> None:
    rows = [planned(i, delay=3600) for i in range(1, 121)]

    writer(client).write_all(rows)
    writer(client).write_all(rows[:10])  # duplicates: not counted again

    counts = MessageStorage("messages", client=client).counts(QUEUES["orders"])
    assert full_queue_doc(QUEUES["orders"], counts)["counts"]["pending"] == len(rows)


def test_an_existing_message_is_a_duplicate_and_stays_as_it_was(client: Any) -> None:
    row = planned(1, delay=3600)
    writer(client).write_all([row])
    changed = Planned(row.queue, row.id, None, row.status, row.due_ms, None, None, row.item.replace('"1"', '"2"'))

    counts = writer(client).write_all([changed])

    assert (counts.scheduled, counts.duplicate) == (0, 1)
    assert stored(client, row) is not None and stored(client, row)["body"]["S"] == "1"  # type: ignore[index]


def test_a_live_dedup_record_of_another_message_makes_a_duplicate(client: Any) -> None:
    other = dedup_to_item("orders", "order-7", "posted-via-api", NOW + timedelta(hours=1))
    client.put_item(TableName="messages", Item=other)
    row = planned(1, delay=3600, dedup_id="order-7")

    counts = writer(client).write_all([row])

    assert (counts.scheduled, counts.duplicate) == (0, 1)
    assert stored(client, row) is None


def test_an_expired_dedup_record_is_taken_over(client: Any) -> None:
    client.put_item(TableName="messages", Item=dedup_to_item("orders", "order-7", "old", NOW - timedelta(hours=1)))
    row = planned(1, delay=3600, dedup_id="order-7")

    writer(client).write_all([row])

    record = client.get_item(TableName="messages", Key=dedup_key("orders", "order-7"))["Item"]
    assert record["message_id"]["S"] == row.id


def test_due_rows_get_a_timer_and_no_index_keys(client: Any) -> None:
    timers = Timers()
    soon, later = planned(1, delay=10), planned(2, delay=3600)

    counts = writer(client, timers).write_all([soon, later])

    assert [s.timer.id for s in timers.sent] == [soon.id]
    assert "sweep_pk" not in stored(client, soon)  # type: ignore[operator]
    assert stored(client, later)["sweep_pk"]["S"] == later.sweep_pk  # type: ignore[index]
    assert (counts.handed_off, counts.swept) == (1, 1)


def test_refused_timers_fall_back_to_the_due_index(client: Any) -> None:
    soon = planned(1, delay=10)

    counts = writer(client, Timers(refuse=True)).write_all([soon])

    assert stored(client, soon)["sweep_sk"]["S"] == soon.sweep_sk  # type: ignore[index]
    assert (counts.handed_off, counts.handoff_fallback) == (0, 1)


class ThroughputExceeded:
    """A DynamoDB client whose first `times` BatchWriteItem calls fail with a throughput error."""

    def __init__(self, client: Any, times: int) -> None:
        self.client = client
        self.times = times

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        if self.times > 0:
            self.times -= 1
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
            raise ClientError(error, "BatchWriteItem")  # type: ignore[arg-type]
        return dict(self.client.batch_write_item(RequestItems=RequestItems))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_throttled_writes_are_retried_and_counted(client: Any) -> None:
    rows = [planned(i, delay=3600) for i in range(1, 6)]

    counts = writer(ThroughputExceeded(client, times=2)).write_all(rows)

    assert (counts.scheduled, counts.throttled) == (5, 2)
    assert all(stored(client, row) is not None for row in rows)


def test_unprocessed_items_count_as_throttled(client: Any) -> None:
    counts = writer(Throttled(client, times=3)).write_all([planned(i, delay=3600) for i in range(1, 31)])

    assert counts.throttled == 3


def test_the_budget_paces_writes_to_its_rate() -> None:
    clock = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    budget = WriteBudget(50.0, clock=lambda: clock[0], sleep=sleep)
    for _ in range(8):
        budget.take(25)

    # 200 units at 50/s, the first second's 50 already in the bucket: 3 s of waiting.
    assert sum(sleeps) == pytest.approx(3.0)


def test_throttling_halves_the_rate_and_success_climbs_back() -> None:
    budget = WriteBudget(100.0)

    budget.throttled()
    budget.throttled()
    halved = budget.rate
    for _ in range(100):
        budget.succeeded()

    assert (halved, budget.rate) == (25.0, 100.0)


def test_a_retried_task_counts_what_its_failed_attempt_stored(client: Any) -> None:
    rows = [planned(1, delay=3600), planned(2, delay=10)]
    run = WriteSettings(run="run-1")
    first = TableWriter(Deployment(table="messages"), NOW, run, clock=lambda: NOW, client=client, timers=Timers())
    first.write_all(rows[:1])  # the attempt that failed after its first chunk

    again = TableWriter(Deployment(table="messages"), NOW, run, clock=lambda: NOW, client=client, timers=Timers())
    counts = again.write_all(rows)

    assert (counts.scheduled, counts.duplicate, counts.swept, counts.handed_off) == (2, 0, 1, 1)


def test_another_run_counts_them_as_duplicates(client: Any) -> None:
    row = planned(1, delay=3600)
    TableWriter(
        Deployment(table="messages"), NOW, WriteSettings(run="run-1"), client=client, timers=Timers()
    ).write_all([row])

    counts = TableWriter(
        Deployment(table="messages"), NOW, WriteSettings(run="run-2"), client=client, timers=Timers()
    ).write_all([row])

    assert (counts.scheduled, counts.duplicate) == (0, 1)


class Sized:
    def __init__(self, size: int) -> None:
        self.size = size

    def describe_table(self, TableName: str) -> dict[str, Any]:
        return {"Table": {"TableName": TableName, "TableSizeBytes": self.size}}


@pytest.mark.parametrize(("size", "segments"), [(0, 4), (10 * 2**30, 80)])
def test_scan_segments_follow_the_table_size(size: int, segments: int, monkeypatch: pytest.MonkeyPatch) -> None:
    located = Deployment(table="messages")
    monkeypatch.setattr(Deployment, "client", lambda self, service: Sized(size))

    assert table.scan_segments(located, at_least=4) == segments


def test_a_large_body_goes_to_a_body_item_as_ingest_places_it(client: Any) -> None:
    row = planned(1, delay=3600, body="x" * 2000)

    writer(client).write_all([row])

    body = client.get_item(TableName="messages", Key=body_key("orders", row.id, 1)).get("Item")
    assert body is not None and json.loads(body["body"]["S"]) == "x" * 2000
    assert "body" not in stored(client, row)  # type: ignore[operator]


def test_a_body_above_the_item_threshold_goes_to_s3(client: Any) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="bodies")
    row = planned(1, delay=3600, body="x" * 20_000)
    bulk = TableWriter(
        Deployment(table="messages", body_bucket="bodies"), NOW, clock=lambda: NOW, client=client, timers=Timers()
    )

    bulk.write_all([row])

    assert BodyStore("bodies", client=s3).get_text("orders", row.id, 1) == json.dumps("x" * 20_000)
    assert stored(client, row)["body_in"]["S"] == "s3"  # type: ignore[index]
