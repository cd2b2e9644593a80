"""DynamoDB-JSON item mapping of queues and messages."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.adapters import items
from hourglass.core import failure_notice
from hourglass.core.model import (
    HttpTarget,
    LaterTarget,
    Message,
    Notice,
    NoticeStatus,
    Queue,
    QueueSettings,
    RetryPolicy,
    SqsTarget,
    Status,
)
from hourglass.core.recurrence import Recurrence, Schedule
from hourglass.core.schedule import SweepKeys

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)

MINIMAL = Message(id="abc", queue="orders", body={"a": [1, 2]}, status=Status.PENDING, created_at=NOW, due_at=NOW)
FULL = Message(
    id="def",
    queue="@later",
    body="héllo",
    status=Status.FAILED,
    created_at=NOW,
    due_at=NOW + timedelta(milliseconds=1500),
    version=7,
    expires_at=NOW + timedelta(hours=1),
    attempts=3,
    delivered_at=NOW + timedelta(seconds=2),
    last_error="HTTP 500",
    dedup_id="order-42",
    target=LaterTarget(url="http://example.com/cb"),
    queue_epoch=NOW - timedelta(days=1),
    claimed_until=NOW + timedelta(minutes=2),
    topic="order",
    retry=RetryPolicy(max_attempts=4, backoff_base=10.0, backoff_max=31536000.0),
)


@pytest.mark.parametrize(
    "message",
    [
        MINIMAL,
        FULL,
        replace(MINIMAL, target=HttpTarget(url="https://e.com", headers={"X-A": "b"})),
        replace(MINIMAL, target=SqsTarget(queue_url="https://sqs.x/1/q")),
        replace(MINIMAL, body=None),
    ],
)
def test_message_round_trip(message):
    assert items.message_from_item(items.message_to_item(message)) == message


def test_message_item_keys():
    item = items.message_to_item(MINIMAL)
    assert (item["pk"], item["sk"]) == ({"S": "orders"}, {"S": "m#abc"})


def test_message_item_times_are_epoch_ms():
    item = items.message_to_item(FULL)
    assert item["created_at"] == {"N": "1795255200000"}
    assert item["due_at"] == {"N": "1795255201500"}


def test_message_item_omits_absent_optionals():
    item = items.message_to_item(MINIMAL)
    assert not {"expires_at", "delivered_at", "last_error", "dedup_id", "target", "sweep_pk", "sweep_sk"} & set(item)


def test_message_item_carries_sweep_keys_only_when_given():
    item = items.message_to_item(MINIMAL, SweepKeys(pk="29587586#3", sk="1795255200000#abc"))
    assert (item["sweep_pk"], item["sweep_sk"]) == ({"S": "29587586#3"}, {"S": "1795255200000#abc"})


def test_message_from_item_ignores_sweep_keys():
    item = items.message_to_item(MINIMAL, SweepKeys(pk="1#0", sk="x"))
    assert items.message_from_item(item) == MINIMAL


def test_message_body_is_stored_as_json_text():
    assert items.message_to_item(MINIMAL)["body"] == {"S": '{"a":[1,2]}'}


QUEUES = [
    Queue("orders", QueueSettings(), NOW),
    Queue(
        "hooks",
        QueueSettings(
            default_delay=5.0,
            max_delay=3600.0,
            ttl=60.0,
            target=HttpTarget(url="https://example.com/hook", headers={"X-Token": "t"}),
            retry=RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_max=30.0),
            signing_secret="s3cret",
        ),
        NOW,
    ),
    Queue("fanout", QueueSettings(target=SqsTarget(queue_url="https://sqs.x/1/q.fifo")), NOW),
]


@pytest.mark.parametrize("queue", QUEUES, ids=lambda q: q.name)
def test_queue_round_trip(queue):
    assert items.queue_from_item(items.queue_to_item(queue)) == queue


def test_queue_item_keys():
    item = items.queue_to_item(QUEUES[0])
    assert (item["pk"], item["sk"], item["created_at"]) == ({"S": "orders"}, {"S": "#queue"}, {"N": "1795255200000"})


def test_dedup_key():
    assert items.dedup_key("orders", "order-42") == {"pk": {"S": "orders"}, "sk": {"S": "d#order-42"}}


def test_a_stored_schedule_with_a_period_below_todays_bound_still_reads():
    # As if MIN_EVERY was raised after the schedule was stored: reading does not re-run request validation.
    rule = '{"cron":null,"every":30,"timezone":"UTC","start_at":null,"end_at":null}'
    item = {
        **items.schedule_key("orders", "fast"),
        "name": {"S": "fast"},
        "rule": {"S": rule},
        "body": {"S": "1"},
        "created_at": {"N": "1795255200000"},
        "paused": {"BOOL": False},
        "version": {"N": "1"},
    }
    assert items.schedule_from_item(item).recurrence.every == 30


def test_a_schedule_reads_back_when_it_was_written():
    rule = Recurrence(every=3600)
    schedule = Schedule("orders", "hourly", rule, {"tick": 1}, created_at=NOW, written_at=NOW + timedelta(hours=1))
    assert items.schedule_from_item(items.schedule_to_item(schedule)) == schedule


def test_a_message_in_the_outbox_reads_with_its_pending_notice_and_next_try():
    failed = replace(MINIMAL, status=Status.FAILED)
    item = items.message_to_item(failed, failure_notice.outbox_keys(failed.id, NOW))
    notice = items.message_from_item(item).notice
    assert notice == Notice(NoticeStatus.PENDING, 0, None, NOW + failure_notice.OUTBOX_GRACE)


def test_a_given_up_notice_reads_back_and_a_new_version_starts_without_it():
    failed = replace(MINIMAL, status=Status.FAILED)
    item = {
        **items.message_to_item(failed),
        "notice_status": {"S": "abandoned"},
        "notice_tries": {"N": "10"},
        "notice_error": {"S": "HTTP 503"},
    }
    read = items.message_from_item(item)
    assert read.notice == Notice(NoticeStatus.ABANDONED, 10, "HTTP 503")
    assert "notice_status" not in items.message_to_item(replace(read, status=Status.PENDING, version=2))
