"""Stored item formats across releases (docs/upgrades.md, "Formats"): every item 1.3.0 writes names its format, an
item as 1.2.0 wrote it (no `fv`) still reads, and one of a newer format is refused and left as it is."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hourglass.adapters.items import message_key, queue_key
from hourglass.core import formats
from hourglass.core.attempts import Attempt, AttemptOutcome
from hourglass.core.failure_notice import QueuePaused
from hourglass.core.keys import (
    BODY_PREFIX,
    BREAKER_PREFIX,
    BUCKETS_PK,
    COUNT_PREFIX,
    DEDUP_PREFIX,
    ENDED_SK,
    HISTORY_PREFIX,
    MESSAGE_PREFIX,
    ORDER_PREFIX,
    QUEUE_NOTICE_PREFIX,
    QUEUE_SK,
    RATE_PREFIX,
    REGISTRY_PK,
    REPAIR_PK,
    RUNNING_OPERATIONS_PK,
    SCHEDULE_PREFIX,
    SLOT_PREFIX,
    SWEEPER_PK,
)
from hourglass.core.model import Notice, NoticeStatus
from hourglass.core.ordering import KeyState
from hourglass.core.pacing import Item as PaceItem
from hourglass.core.pacing import PaceState, Window
from hourglass.core.repair_round import RepairRound
from hourglass.core.sweep_state import ShardProgress
from hourglass.errors import NewerFormatError
from hourglass.handlers import api as api_handler

from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post

# Items release 1.2.0 wrote (its own code, `git archive v1.2.0`, through its API under moto): a queue with
# max_concurrency, a message with a dedup id, a flow key and a body in a body item, a schedule and its occurrence.
ITEMS_1_2_0 = json.loads((Path(__file__).parent / "items_v1_2_0.json").read_text())
OLD_MESSAGE = "00cae085559341c8bb9bb1a9841a943d"


def scan(h: Harness) -> list[dict[str, Any]]:
    return list(h.ddb.scan(TableName=h.ctx.settings.table)["Items"])


def kind_of(item: dict[str, Any]) -> str:
    """The kind (core.formats) of a stored item, from its keys."""
    pk, sk = item["pk"]["S"], item["sk"]["S"]
    by_pk = {
        REGISTRY_PK: "queue_life",
        RUNNING_OPERATIONS_PK: "operation",
        BUCKETS_PK: "due_width",
        SWEEPER_PK: "sweep",
        REPAIR_PK: "sweep",
    }
    if pk in by_pk:
        return by_pk[pk]
    by_prefix = {
        QUEUE_SK: "queue",
        ENDED_SK: "queue_life",
        MESSAGE_PREFIX: "message",
        DEDUP_PREFIX: "dedup",
        BODY_PREFIX: "body",
        SCHEDULE_PREFIX: "schedule",
        "o#": "operation",
        HISTORY_PREFIX: "attempt",
        COUNT_PREFIX: "count",
        "#pace": "pacing",
        SLOT_PREFIX: "slot",
        BREAKER_PREFIX: "breaker",
        QUEUE_NOTICE_PREFIX: "notice",
        ORDER_PREFIX: "order",
        RATE_PREFIX: "rate",
    }
    return next(kind for prefix, kind in by_prefix.items() if sk.startswith(prefix))


def write_every_kind(h: Harness) -> None:
    """At least one item of every kind, each through the code that writes it."""
    store, now = h.ctx.store, h.clock.now
    make_queue(h)
    post(h, {"body": {"text": "x" * 1500}, "delay": 3600, "dedup_id": "d-1"})
    assert h.call("PUT", "/v1/queues/orders/schedules/nightly", {"every": 3600, "body": {}})[0] == 201
    assert h.call("POST", "/v1/queues/orders/operations", {"action": "cancel"})[0] == 202
    h.sweep()
    store.save_shard_progress({0: ShardProgress(watermark=1)})
    store.save_repair_position(RepairRound(after="x", started=now))
    store.put_attempt("orders", Attempt("m1", 1, now, now, AttemptOutcome.FAILED))
    store.advance_pace("orders", PaceItem(None, Window(1_000_000, 5)), PaceState(), (0,), "m1#1")
    assert store.acquire_slot("orders", 2, "m1#1", until_ms=10**13, now_ms=0, flow_key="k") is not None
    store.count_outcome("orders", None, 1, attempts=1, failures=1, expire_at=10**10)
    notice = Notice(NoticeStatus.PENDING, next_try_at=now, finished_at=now)
    assert store.trip(None, QueuePaused("orders", "failing", 0.9, now, None, notice), notify=True)
    assert store.save_key_order("orders", "k", KeyState(head="m1"), KeyState())
    store.add_bucket_writes(7, 10, now=now, expire_at=10**10)
    store.widen_bucket(8, 16, expire_at=10**10)
    store.end_queue("gone", now)
    store.add_to_window("orders", 1, 100)


@pytest.mark.parametrize("kind", sorted(formats.FORMATS.keys() - {"timer"}))
def test_every_kind_of_item_is_written_with_its_format(harness: Harness, kind: str) -> None:
    write_every_kind(harness)
    written = [item.get("fv", {}).get("N") for item in scan(harness) if kind_of(item) == kind]
    # A queue created by this release keeps its slots in partitions of its own (`slot_layout` 2): format 2.
    expected = formats.FORMATS[kind]
    assert written and set(written) == {str(expected)}


def test_a_queue_with_ordering_or_slots_of_its_own_is_format_2_and_one_with_neither_format_1(
    harness: Harness,
) -> None:
    make_queue(harness, "ordered", {**HTTP_QUEUE, "ordering": {"by": "flow_key"}})
    make_queue(harness, "plain")
    load_1_2_0(harness)  # "orders", as 1.2.0 stored it: its slots in its own partition
    make_queue(harness, "orders", {**HTTP_QUEUE, "max_concurrency": 2})  # a PUT over it keeps them there
    stored = {
        name: harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=queue_key(name))["Item"]["fv"]["N"]
        for name in ("ordered", "plain", "orders")
    }
    assert stored == {"ordered": "2", "plain": "2", "orders": "1"}


def test_a_spread_queue_is_format_2(harness: Harness) -> None:
    make_queue(harness)
    queue = harness.ctx.store.get_queue("orders", consistent=True)
    assert queue is not None and harness.ctx.store.spread_queue("orders", queue.created_at, 64)
    stored = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=queue_key("orders"))["Item"]
    assert (stored["fv"]["N"], stored["partitions"]["N"]) == ("2", "64")


def load_1_2_0(h: Harness) -> None:
    for item in ITEMS_1_2_0:
        h.ddb.put_item(TableName=h.ctx.settings.table, Item=item)


def test_items_as_1_2_0_wrote_them_are_read(harness: Harness) -> None:
    load_1_2_0(harness)
    queue = harness.call("GET", "/v1/queues/orders")
    message = get(harness, OLD_MESSAGE)
    schedule = harness.call("GET", "/v1/queues/orders/schedules/nightly")
    assert (queue[0], queue[1]["max_concurrency"], schedule[0], schedule[1]["every"]) == (200, 2, 200, 3600)
    assert (message["status"], message["body"]["text"], message["flow_key"]) == ("pending", "x" * 1500, "k1")


def test_a_message_of_1_2_0_is_delivered_and_rewritten_in_this_release_s_format(harness: Harness) -> None:
    load_1_2_0(harness)
    harness.clock.now += timedelta(hours=1)
    harness.sweep()
    assert harness.dispatch(harness.timers()) == []
    stored = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=message_key("orders", OLD_MESSAGE))
    delivered = [r for r in harness.receiver.requests if r["headers"]["Hourglass-Message-Id"] == OLD_MESSAGE]
    assert (len(delivered), stored["Item"]["status"]["S"], stored["Item"]["fv"]["N"]) == (1, "delivered", "1")


def newer(h: Harness, key: dict[str, Any], kind: str) -> dict[str, Any]:
    """The stored item at `key` made one format newer than this release reads; returns it as stored."""
    item = h.ddb.get_item(TableName=h.ctx.settings.table, Key=key)["Item"]
    item["fv"] = {"N": str(formats.FORMATS[kind] + 1)}
    h.ddb.put_item(TableName=h.ctx.settings.table, Item=item)
    return dict(item)


@pytest.mark.parametrize(
    ("kind", "read"),
    [
        ("message", lambda h: h.ctx.store.get_message("orders", OLD_MESSAGE)),
        ("queue", lambda h: h.ctx.store.get_queue("orders")),
        ("schedule", lambda h: h.ctx.store.get_schedule("orders", "nightly")),
    ],
)
def test_an_item_of_a_newer_format_is_refused(harness: Harness, kind: str, read: Callable[[Harness], Any]) -> None:
    load_1_2_0(harness)
    sk = {"message": f"{MESSAGE_PREFIX}{OLD_MESSAGE}", "queue": QUEUE_SK, "schedule": f"{SCHEDULE_PREFIX}nightly"}
    newer(harness, {"pk": {"S": "orders"}, "sk": {"S": sk[kind]}}, kind)
    with pytest.raises(NewerFormatError):
        read(harness)


def call(h: Harness, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """The API's whole response (headers too)."""
    event: dict[str, Any] = {"httpMethod": method, "path": path, "headers": {}}
    event["body"] = None if body is None else json.dumps(body)
    return api_handler.handle(h.api, event)


def test_the_api_answers_503_with_retry_after_for_a_newer_item_and_changes_nothing(harness: Harness) -> None:
    load_1_2_0(harness)
    key = message_key("orders", OLD_MESSAGE)
    stored = newer(harness, key, "message")
    got = call(harness, "GET", f"/v1/queues/orders/messages/{OLD_MESSAGE}")
    cancelled = call(harness, "DELETE", f"/v1/queues/orders/messages/{OLD_MESSAGE}")
    after = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=key)["Item"]
    assert [(r["statusCode"], r["headers"].get("Retry-After")) for r in (got, cancelled)] == [(503, "10")] * 2
    assert "newer release" in json.loads(got["body"])["error"]["message"]
    assert after == stored


def test_a_newer_message_is_neither_begun_nor_dead_lettered_its_timer_goes_back(harness: Harness) -> None:
    load_1_2_0(harness)
    harness.clock.now += timedelta(hours=1)
    harness.sweep()
    timers = harness.timers()
    key = message_key("orders", OLD_MESSAGE)
    stored = newer(harness, key, "message")
    failed = harness.dispatch(timers)
    after = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=key)["Item"]
    sent_back = [t["json"]["id"] for t in harness.timers()]
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    assert (failed, after, sent_back) == ([], stored, [OLD_MESSAGE])
    assert OLD_MESSAGE not in delivered


def test_the_sweeper_leaves_a_newer_message_as_it_is(harness: Harness) -> None:
    load_1_2_0(harness)
    key = message_key("orders", OLD_MESSAGE)
    stored = newer(harness, key, "message")
    harness.clock.now += timedelta(hours=1)
    harness.sweep()
    after = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=key)["Item"]
    assert (after, OLD_MESSAGE in [t["json"]["id"] for t in harness.timers()]) == (stored, False)


def test_a_queue_of_a_newer_format_does_not_stop_the_sweep_and_its_messages_wait(harness: Harness) -> None:
    make_queue(harness, "orders")
    make_queue(harness, "later")
    [kept] = post(harness, {"body": 1, "delay": 3600}, queue="later")
    [sent] = post(harness, {"body": 2, "delay": 3600})
    stored = newer(harness, queue_key("later"), "queue")
    harness.clock.now += timedelta(hours=1)
    harness.sweep()
    assert harness.dispatch(harness.timers()) == []
    waiting = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=message_key("later", kept["id"]))["Item"]
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    queue_after = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=queue_key("later"))["Item"]
    assert (delivered, waiting["status"]["S"], queue_after) == ([sent["id"]], "pending", stored)
    assert [t["json"]["id"] for t in harness.timers()] == [kept["id"]]
