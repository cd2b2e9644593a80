"""The sweep's claim only where it buys something (issue 35): a queue with no limits, ordering or schedules is
handed off unclaimed; its messages are still delivered once each, never early, in any order of their timers."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from hourglass.core import delivery_control
from hourglass.core.model import DeliveryControl, FlowControl, Ordering
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.timestamps import from_ms

from tests.faults.proxies import timer_ids
from tests.integration.conftest import Harness
from tests.integration.test_flow import CLAIMED_QUEUE, HTTP_QUEUE, get, make_queue, post

SWEEPER_STATE = {"pk": {"S": "@sweeper"}, "sk": {"S": "#state"}}


@pytest.mark.parametrize(
    ("control", "claims"),
    [
        (DeliveryControl(), False),
        (DeliveryControl(window=None, circuit_breaker=None, paused=True), False),
        (DeliveryControl(rate_limit=5.0), True),
        (DeliveryControl(max_concurrency=3), True),
        (DeliveryControl(flow_control=FlowControl(key_max_concurrency=1)), True),
        (DeliveryControl(ordering=Ordering()), True),
    ],
    ids=["none", "paused", "rate_limit", "max_concurrency", "key_max_concurrency", "ordering"],
)
def test_only_limits_and_ordering_need_the_claim(control: DeliveryControl, claims: bool) -> None:
    assert delivery_control.claims_hand_offs(control) is claims


def swept(h: Harness, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    make_queue(h, settings=settings)
    [created] = post(h, {"body": 1, "delay": 600})
    h.clock.advance(400)
    h.sweep()
    return h.ctx.store.get_message("orders", created["id"])  # type: ignore[return-value]


def test_a_queue_without_features_is_handed_off_unclaimed_and_stays_indexed_until_its_start(harness: Harness) -> None:
    message = swept(harness)
    timers = harness.timers()
    assert message.claimed_until is None and timer_ids(timers) == [message.id]
    assert harness.ddb.scan(TableName="messages", IndexName="due")["Count"] == 1
    harness.dispatch(timers)
    assert get(harness, message.id)["status"] == "delivered"
    assert harness.ddb.scan(TableName="messages", IndexName="due")["Count"] == 0


def test_a_queue_with_limits_is_claimed(harness: Harness) -> None:
    assert swept(harness, CLAIMED_QUEUE).claimed_until is not None


def test_a_queue_with_a_schedule_is_claimed(harness: Harness) -> None:
    make_queue(harness)
    status, _ = harness.call("PUT", "/v1/queues/orders/schedules/nightly", {"every": 86400, "body": {}})
    assert status == 201
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    harness.sweep()
    assert harness.ctx.store.get_message("orders", created["id"]).claimed_until is not None  # type: ignore[union-attr]


def test_a_schedule_put_later_is_seen_within_the_views_lifetime(harness: Harness) -> None:
    make_queue(harness)
    assert harness.ctx.limits.claims("orders") is False
    assert harness.call("PUT", "/v1/queues/orders/schedules/nightly", {"every": 86400, "body": {}})[0] == 201
    harness.clock.advance(31)
    assert harness.ctx.limits.claims("orders") is True


def due_at(h: Harness, message_id: str) -> datetime:
    return datetime.fromisoformat(get(h, message_id)["due_at"].replace("Z", "+00:00"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_duplicate_timers_of_messages_due_at_different_times_in_any_order_deliver_each_once_none_early(
    harness: Harness, seed: int
) -> None:
    make_queue(harness, settings=HTTP_QUEUE)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 400 + 23 * i} for i in range(8)))]
    harness.clock.advance(300)
    timers = []
    for _ in range(3):  # three runs from one watermark: every message gets three timers
        harness.sweep()
        timers += harness.timers()
        harness.ddb.delete_item(TableName="messages", Key=SWEEPER_STATE)
    random.Random(seed).shuffle(timers)
    started: dict[str, datetime] = {}
    for timer in timers:
        visible = from_ms(timer["json"]["due"]) - timedelta(seconds=TIMER_HEAD_START)
        harness.clock.now = max(harness.clock.now, visible)
        before = len(harness.receiver.requests)
        harness.dispatch([timer])
        for request in harness.receiver.requests[before:]:
            started[request["headers"]["Hourglass-Message-Id"]] = harness.clock.now
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    assert sorted(timer_ids(timers)) == sorted(ids * 3)
    assert sorted(delivered) == sorted(ids)
    assert all(started[i] >= due_at(harness, i) for i in ids)
