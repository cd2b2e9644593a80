"""One admission for every message version: what a POST refuses is refused at schedule PUT, PATCH, redeliver
and bulk operations too; occurrences are placed and expire as POSTed messages do; failure notices fit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import message_key
from hourglass.core import limits

from tests.integration.conftest import Harness
from tests.integration.test_delivery_control import run_until_quiet
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.integration.test_schedules import occurrences, put, run_until

# What SQS allows a queue by default, and Hourglass assumes of every target (moto's default is 1 MiB).
SQS_LIMIT = {"MaximumMessageSize": str(limits.SQS_MESSAGE_BYTES)}
# The largest body a POST accepts for any SQS target (ids and queue names of 64 characters).
LARGEST_SQS_BODY = "x" * (limits.SQS_MESSAGE_BYTES - limits.ENVELOPE_OVERHEAD - 2)
FULL_BODY = "x" * (256 * 1024 - 2)


def sqs_queue(h: Harness, name: str) -> str:
    return str(h.sqs.create_queue(QueueName=name, Attributes=SQS_LIMIT)["QueueUrl"])


def sqs_target(h: Harness, name: str = "target-sqs") -> dict[str, Any]:
    return {"target": {"type": "sqs", "queue_url": sqs_queue(h, name)}}


def hook(kib_of_headers: int) -> dict[str, Any]:
    """An HTTP target whose 32 headers hold `kib_of_headers` characters "é" each (2 UTF-8 bytes)."""
    headers = {f"X-H{i}": "é" * kib_of_headers for i in range(32)}
    return {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": headers}


# schedules are admitted at PUT as their occurrences will be -----------------------------------
def test_a_schedule_a_post_would_refuse_is_a_413_naming_body(harness: Harness) -> None:
    make_queue(harness)
    status, doc = put(harness, "big", {"every": 3600, "body": "x" * 262_000, "target": hook(2240)})
    assert (status, doc["error"]["code"], doc["error"]["message"].split(":")[0]) == (413, "too_large", "body")


def test_a_schedule_whose_occurrence_would_not_fit_is_refused_and_not_stored(harness: Harness) -> None:
    # The schedule item alone fits DynamoDB; the occurrence item, with its message attributes, does not.
    make_queue(harness)
    status, _ = put(harness, "big", {"every": 3600, "body": "x" * 262_000, "target": hook(2224)})
    assert (status, harness.call("GET", "/v1/queues/orders/schedules/big")[0]) == (413, 404)


def test_a_schedule_too_large_for_its_sqs_target_is_refused_at_put(harness: Harness) -> None:
    make_queue(harness, settings=sqs_target(harness))
    status, _ = put(harness, "big", {"every": 60, "body": FULL_BODY})
    assert (status, harness.call("GET", "/v1/queues/orders/schedules/big")[0]) == (413, 404)


def test_an_occurrence_envelope_counts_its_schedule_name(harness: Harness) -> None:
    # The body a POST to this queue takes is too large once the envelope also names a 64-character schedule.
    queue = "q" * 64
    make_queue(harness, queue, sqs_target(harness))
    posted = harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": LARGEST_SQS_BODY}]})[0]
    scheduled = harness.call("PUT", f"/v1/queues/{queue}/schedules/{'s' * 64}", {"every": 60, "body": LARGEST_SQS_BODY})
    assert (posted, scheduled[0]) == (201, 413)


# occurrences are placed as any message is ---------------------------------------------------------
@pytest.fixture
def with_s3(harness: Harness) -> Harness:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="bodies")
    harness.ctx.store.configure_bodies(retention=timedelta(days=7), body_store=BodyStore("bodies", client=s3))
    return harness


def stored_bodies(h: Harness, message_id: str) -> tuple[int, int, bool]:
    """Body items, S3 objects, and whether the message item holds its body."""
    items = h.ddb.scan(TableName="messages")["Items"]
    body_items = [i for i in items if i["sk"]["S"].startswith("b#")]
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket="bodies")
    item = h.ddb.get_item(TableName="messages", Key=message_key("orders", message_id))["Item"]
    return len(body_items), len(listed.get("Contents", [])), "body" in item


@pytest.mark.parametrize(("size", "expected"), [(100, (0, 0, True)), (2_000, (1, 0, False)), (200_000, (0, 1, False))])
def test_an_occurrence_s_body_is_placed_as_a_posted_message_s(
    with_s3: Harness, size: int, expected: tuple[int, int, bool]
) -> None:
    make_queue(with_s3)
    put(with_s3, "hourly", {"every": 3600, "body": {"text": "x" * size}})
    [occurrence] = occurrences(with_s3, "hourly")
    assert stored_bodies(with_s3, occurrence["id"]) == expected
    assert occurrence["body"] == {"text": "x" * size}


def test_an_occurrence_with_a_full_body_is_delivered_whole(with_s3: Harness) -> None:
    make_queue(with_s3)
    put(with_s3, "minutely", {"every": 60, "body": FULL_BODY})
    run_until(with_s3, with_s3.clock.now + timedelta(seconds=65))
    assert {r["body"] for r in with_s3.receiver.requests} == {FULL_BODY}


# expiry counts from the right origin ---------------------------------------------------------------
def test_an_occurrence_expires_counting_from_its_own_time(harness: Harness) -> None:
    # Stored an hour before it is due: a queue ttl of 60 s must not expire it before it is due.
    make_queue(harness, settings={**HTTP_QUEUE, "ttl": 60})
    put(harness, "hourly", {"every": 3600, "body": 1})
    run_until(harness, harness.clock.now + timedelta(seconds=3610))
    assert [m["status"] for m in occurrences(harness, "hourly")][:1] == ["delivered"]


# failure notices fit their destination --------------------------------------------------------------
def test_a_full_message_s_failure_notice_reaches_an_sqs_destination_without_its_body(harness: Harness) -> None:
    url = sqs_queue(harness, "target-failures")
    destination = {"type": "sqs", "queue_url": url}
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}, "failure_destination": destination})
    harness.receiver.answers = [500]
    [created] = post(harness, {"body": FULL_BODY})
    run_until_quiet(harness)
    notices = harness.target_messages(url)
    assert [(n["id"], n["status"], n["body"], n["body_omitted"]) for n in notices] == [
        (created["id"], "failed", None, True)
    ]
    assert get(harness, created["id"])["body"] == FULL_BODY


# PATCH, redeliver and bulk operations go through the same admission -------------------------------
def test_a_patch_that_would_overflow_an_occurrence_envelope_is_a_413(harness: Harness) -> None:
    queue = "q" * 64
    make_queue(harness, queue, sqs_target(harness))
    harness.call("PUT", f"/v1/queues/{queue}/schedules/{'s' * 64}", {"every": 3600, "body": 1})
    [occurrence] = harness.call("GET", f"/v1/queues/{queue}/messages")[1]["messages"]
    path = f"/v1/queues/{queue}/messages/{occurrence['id']}"
    status, _ = harness.call("PATCH", path, {"body": LARGEST_SQS_BODY})
    assert (status, harness.call("GET", path)[1]["body"]) == (413, 1)


def failed_then_sqs(h: Harness) -> str:
    """A full message failed at its HTTP target, on a queue whose target is then an SQS queue."""
    make_queue(h, settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}})
    h.receiver.answers = [500]
    [created] = post(h, {"body": FULL_BODY})
    run_until_quiet(h)
    make_queue(h, settings=sqs_target(h))
    return str(created["id"])


def test_redeliver_of_a_body_its_target_can_no_longer_take_is_a_413(harness: Harness) -> None:
    message_id = failed_then_sqs(harness)
    status, _ = harness.call("POST", f"/v1/queues/orders/messages/{message_id}/redeliver")
    assert (status, get(harness, message_id)["status"]) == (413, "failed")


def test_bulk_redeliver_skips_a_body_its_target_can_no_longer_take(harness: Harness) -> None:
    message_id = failed_then_sqs(harness)
    _, started = harness.call("POST", "/v1/queues/orders/operations", {"action": "redeliver"})
    _, done = harness.call("GET", f"/v1/queues/orders/operations/{started['id']}")
    assert (done["applied"], done["skipped"], get(harness, message_id)["status"]) == (0, 1, "failed")


def test_bulk_shift_skips_a_body_its_target_can_no_longer_take(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": FULL_BODY, "delay": 3600})
    make_queue(harness, settings=sqs_target(harness))
    _, started = harness.call("POST", "/v1/queues/orders/operations", {"action": "shift", "seconds": 60})
    _, done = harness.call("GET", f"/v1/queues/orders/operations/{started['id']}")
    assert (done["applied"], done["skipped"], get(harness, created["id"])["due_at"]) == (
        0,
        1,
        "2026-11-21T11:00:00.000Z",
    )
