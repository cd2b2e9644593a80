"""The message document's `finished_at`: when it reached delivered, failed, expired or cancelled (null before),
kept by the write that ends it at no added write unit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.adapters.items import item_size
from hourglass.core import body_placement, keys
from hourglass.core.timestamps import format_rfc3339

from bench.capacity_units import write_units
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post


def cancel(h: Harness, message_id: str) -> None:
    status, doc = h.call("DELETE", f"/v1/queues/orders/messages/{message_id}")
    assert status == 204, doc


def raw_item(h: Harness, message_id: str) -> dict[str, Any]:
    key = {"pk": {"S": "orders"}, "sk": {"S": keys.message_sk(message_id)}}
    return dict(h.ddb.get_item(TableName=h.ctx.settings.table, Key=key, ConsistentRead=True)["Item"])


def test_a_pending_message_has_no_finished_at(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3600})
    assert get(harness, created["id"])["finished_at"] is None


def test_a_cancelled_message_shows_when_it_was_cancelled(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3600})
    harness.clock.now += timedelta(seconds=42)
    cancelled_at = harness.clock()
    cancel(harness, created["id"])
    assert get(harness, created["id"])["finished_at"] == format_rfc3339(cancelled_at)


def test_a_delivered_message_finished_when_it_was_delivered(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 30})
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert (doc["status"], doc["finished_at"]) == ("delivered", doc["delivered_at"])


@pytest.mark.parametrize("delay", [30, 3600], ids=["handed-off", "in-the-due-index"])
def test_cancelling_the_largest_inline_message_still_writes_one_unit(harness: Harness, delay: int) -> None:
    """A write is billed by the larger of the item before and after it, per started KB. An item keeps its body
    inline only with `headroom` to spare, which covers what a cancel adds (its status, TTL and finished_at), so
    the cancel that keeps its time writes the one unit it wrote before."""
    make_queue(harness)
    [probe] = post(harness, {"body": "", "delay": delay})
    rest = item_size(raw_item(harness, probe["id"])) - item_size({"body": {"S": '""'}})
    limits = body_placement.DEFAULT_LIMITS
    longest = limits.inline_item_max - limits.headroom - rest - item_size({"body": {"S": '""'}})
    [created] = post(harness, {"body": "x" * longest, "delay": delay})
    pending = raw_item(harness, created["id"])
    cancel(harness, created["id"])
    cancelled = raw_item(harness, created["id"])
    assert ("body" in pending, "finished_at" in cancelled) == (True, True)
    assert write_units(item_size(cancelled)) == write_units(item_size(pending)) == 1
