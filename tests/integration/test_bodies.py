"""Message bodies kept inline, in a body item or in S3: written once, read back whole, never orphaned."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import message_key
from hourglass.core import lifecycle
from hourglass.errors import StaleVersionError

from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

BUCKET = "bodies"
SIZES = {"inline": 100, "item": 2_000, "s3": 20_000}


@pytest.fixture
def h(harness: Harness) -> Harness:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    harness.ctx.store.configure_bodies(retention=timedelta(days=7), body_store=BodyStore(BUCKET, client=s3))
    return harness


def body_of(size: int) -> dict[str, str]:
    return {"text": "x" * size}


def body_items(h: Harness) -> list[dict[str, Any]]:
    items = h.ddb.scan(TableName="messages")["Items"]
    return [i for i in items if i["sk"]["S"].startswith("b#")]


def objects(h: Harness) -> list[str]:
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET)
    return [o["Key"] for o in listed.get("Contents", [])]


def message_item(h: Harness, message_id: str) -> dict[str, Any]:
    return dict(h.ddb.get_item(TableName="messages", Key=message_key("orders", message_id))["Item"])


@pytest.mark.parametrize(
    ("kind", "expected"), [("inline", (0, 0, True)), ("item", (1, 0, False)), ("s3", (0, 1, False))]
)
def test_create_writes_the_body_once_in_its_place(h: Harness, kind: str, expected: tuple[int, int, bool]) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES[kind]), "delay": 3600})
    found = (len(body_items(h)), len(objects(h)), "body" in message_item(h, created["id"]))
    assert found == expected


@pytest.mark.parametrize("kind", list(SIZES))
def test_get_returns_the_whole_body(h: Harness, kind: str) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES[kind]), "delay": 3600})
    assert get(h, created["id"])["body"] == body_of(SIZES[kind])


def test_list_returns_every_body_of_a_mixed_page(h: Harness) -> None:
    make_queue(h)
    post(h, *({"body": body_of(size), "delay": 3600} for size in SIZES.values()))
    status, doc = h.call("GET", "/v1/queues/orders/messages")
    assert status == 200
    assert sorted(len(m["body"]["text"]) for m in doc["messages"]) == sorted(SIZES.values())


def test_dedup_duplicate_leaves_no_second_body(h: Harness) -> None:
    make_queue(h)
    post(h, {"body": body_of(SIZES["s3"]), "delay": 3600, "dedup_id": "k"})
    post(h, {"body": body_of(SIZES["s3"]), "delay": 3600, "dedup_id": "k"})
    assert len(objects(h)) == 1


@pytest.mark.parametrize("kind", list(SIZES))
def test_http_delivery_carries_the_whole_body_and_the_item_stays_small(h: Harness, kind: str) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES[kind]), "delay": 5})
    h.dispatch(h.timers())
    assert h.receiver.requests[0]["body"] == body_of(SIZES[kind])
    item = message_item(h, created["id"])
    assert item["status"]["S"] == "delivered"
    assert ("body" in item) == (kind == "inline")


@pytest.mark.parametrize("kind", ["item", "s3"])
def test_sqs_delivery_carries_the_whole_body(h: Harness, kind: str) -> None:
    target_url = h.sqs.create_queue(QueueName="target-bodies")["QueueUrl"]
    make_queue(h, settings={"target": {"type": "sqs", "queue_url": target_url}})
    post(h, {"body": body_of(SIZES[kind]), "delay": 5})
    h.dispatch(h.timers())
    [delivered] = h.target_messages(target_url)
    assert delivered["body"] == body_of(SIZES[kind])


@pytest.mark.parametrize("kind", ["item", "s3"])
def test_finished_message_keeps_its_body_for_get(h: Harness, kind: str) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES[kind]), "delay": 5})
    h.dispatch(h.timers())
    assert get(h, created["id"])["body"] == body_of(SIZES[kind])


@pytest.mark.parametrize(("old", "new"), [("item", "s3"), ("s3", "item"), ("item", "inline"), ("inline", "s3")])
def test_patch_of_the_body_leaves_exactly_the_new_body(h: Harness, old: str, new: str) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES[old]), "delay": 3600})
    status, _ = h.call("PATCH", f"/v1/queues/orders/messages/{created['id']}", {"body": body_of(SIZES[new])})
    assert status == 200
    stored = (len(body_items(h)), len(objects(h)))
    assert stored == {"inline": (0, 0), "item": (1, 0), "s3": (0, 1)}[new]
    assert get(h, created["id"])["body"] == body_of(SIZES[new])


def test_patch_that_loses_the_race_removes_the_body_it_wrote(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES["item"]), "delay": 3600})
    message = h.ctx.store.get_message("orders", created["id"])
    assert message is not None
    stale = replace(message, version=message.version + 5)
    change = lifecycle.reschedule(stale, due=message.due_at, body=body_of(SIZES["s3"]))
    with pytest.raises(StaleVersionError):
        h.ctx.store.reschedule(change, None, new_body=True)
    assert (len(body_items(h)), len(objects(h))) == (1, 0)
    assert get(h, created["id"])["body"] == body_of(SIZES["item"])


def test_cancel_removes_an_s3_body(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES["s3"]), "delay": 3600})
    status, _ = h.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    assert status in (200, 204)
    assert objects(h) == []


def test_cancel_gives_a_body_item_the_message_s_own_expiry(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES["item"]), "delay": 30 * 86400})
    h.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    [body] = body_items(h)
    assert body["expire_at"] == message_item(h, created["id"])["expire_at"]


def test_retry_past_the_body_item_ttl_extends_it_first(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES["item"]), "delay": 3600})
    message = h.ctx.store.get_message("orders", created["id"])
    assert message is not None
    retry_at = message.due_at + timedelta(days=3)
    h.ctx.store.await_retry(lifecycle.await_retry(message, retry_at, "HTTP 503"), None)
    [body] = body_items(h)
    assert int(body["expire_at"]["N"]) >= int((retry_at + timedelta(days=7)).timestamp())
    assert get(h, created["id"])["body"] == body_of(SIZES["item"])


def test_s3_body_is_tagged_to_outlive_its_message_and_a_late_retry_extends_it(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": body_of(SIZES["s3"]), "delay": 3600})
    message = h.ctx.store.get_message("orders", created["id"])
    assert message is not None
    store = h.ctx.store.bodies
    at_ingest = store.kept_days("orders", message.id, 1)
    h.ctx.store.await_retry(lifecycle.await_retry(message, message.due_at + timedelta(days=20), "HTTP 503"), None)
    assert (at_ingest, store.kept_days("orders", message.id, 1)) == (9, 29)
