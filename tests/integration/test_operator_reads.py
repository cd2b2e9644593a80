"""Contract v1.2, "Lists, counts and errors an operator can read": ordered lists, counts, last_error,
next_attempt_at, deliver-now and `later`'s view of a deleted task, through the REST API."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post


def listed(h: Harness, **params: str) -> tuple[list[dict[str, Any]], str | None]:
    status, doc = h.call("GET", "/v1/queues/orders/messages", params=params)
    assert status == 200, doc
    return doc["messages"], doc["next_cursor"]


def counts(h: Harness) -> dict[str, int]:
    status, doc = h.call("GET", "/v1/queues/orders")
    assert status == 200, doc
    return dict(doc["counts"])


def test_order_due_lists_earliest_scheduled_first(harness: Harness) -> None:
    make_queue(harness)
    ids = [
        m["id"]
        for m in post(harness, {"body": 3, "delay": 3000}, {"body": 1, "delay": 1000}, {"body": 2, "delay": 2000})
    ]
    messages, _ = listed(harness, order="due")
    assert [m["body"] for m in messages] == [1, 2, 3]
    assert {m["id"] for m in messages} == set(ids)


def test_order_due_pages_with_a_cursor_and_keeps_the_status_filter(harness: Harness) -> None:
    make_queue(harness)
    created = post(harness, *({"body": n, "delay": 1000 + n} for n in range(5)))
    harness.call("DELETE", f"/v1/queues/orders/messages/{created[2]['id']}")
    first, cursor = listed(harness, order="due", status="pending", limit="2")
    assert cursor is not None
    rest, end = listed(harness, order="due", status="pending", limit="2", cursor=cursor)
    assert [m["body"] for m in first + rest] == [0, 1, 3, 4]
    assert end is None or listed(harness, order="due", status="pending", cursor=end)[0] == []


def test_order_created_lists_oldest_first(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": "a", "delay": 5000})
    harness.clock.advance(1)
    post(harness, {"body": "b", "delay": 10})
    messages, _ = listed(harness, order="created")
    assert [m["body"] for m in messages] == ["a", "b"]


@pytest.mark.parametrize(("order", "kept"), [("created", "due"), ("due", "created")])
def test_an_order_is_a_400_naming_order_when_the_stack_does_not_keep_it(
    harness: Harness, order: str, kept: str
) -> None:
    harness.ctx.settings = replace(harness.ctx.settings, **{f"order_{order}": False})
    make_queue(harness)
    post(harness, {"body": "a", "delay": 50})
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"order": order})
    assert status == 400
    assert doc["error"]["message"] == f"order: {order} is not kept by this stack (its hourglass:order_{order} is false)"
    assert [m["body"] for m in listed(harness, order=kept)[0]] == ["a"]


def test_an_unknown_order_is_a_400_naming_order(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"order": "priority"})
    assert status == 400
    assert "order" in doc["error"]["message"]


def test_counts_follow_each_status_change(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 30})
    [later] = post(harness, {"body": 2, "delay": 3000})
    harness.call("DELETE", f"/v1/queues/orders/messages/{later['id']}")
    harness.dispatch(harness.timers())
    assert counts(harness) == {
        "pending": 0,
        "delivering": 0,
        "delivered": 1,
        "failed": 0,
        "cancelled": 1,
        "expired": 0,
    }


def test_a_recreated_queue_counts_from_zero(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 3000})
    harness.call("DELETE", "/v1/queues/orders")
    harness.clock.advance(1)
    make_queue(harness)
    assert set(counts(harness).values()) == {0}


def test_delivered_after_a_failure_has_no_last_error(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 30})
    harness.dispatch(harness.timers())
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert (doc["status"], doc["last_error"]) == ("delivered", None)


def test_a_retry_keeps_due_at_and_shows_next_attempt_at(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503]
    [created] = post(harness, {"body": 1, "delay": 30})
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert doc["status"] == "pending"
    assert doc["due_at"] == created["due_at"]
    assert doc["next_attempt_at"] is not None and doc["next_attempt_at"] > doc["due_at"]


def test_a_message_waiting_for_its_own_time_has_no_next_attempt_at(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3000})
    assert get(harness, created["id"])["next_attempt_at"] is None


def test_deliver_now_makes_a_pending_message_due_now(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3000})
    status, doc = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/deliver-now")
    assert status == 200
    harness.dispatch(harness.timers())
    assert get(harness, created["id"])["status"] == "delivered"
    assert doc["due_at"] < created["due_at"]


def test_deliver_now_of_a_cancelled_message_is_a_409(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3000})
    harness.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    status, _ = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/deliver-now")
    assert status == 409


def test_deliver_now_of_an_unknown_message_is_a_404(harness: Harness) -> None:
    make_queue(harness)
    status, _ = harness.call("POST", "/v1/queues/orders/messages/abc123/deliver-now")
    assert status == 404


def test_later_query_after_delete_says_the_task_was_deleted(harness: Harness) -> None:
    _, created = harness.call(
        "POST", "/create", {"topic": "t", "delay": 600, "retry": 1, "callback": "http://127.0.0.1:9/", "content": "x"}
    )
    harness.call("POST", "/delete", {"id": created["id"]})
    status, doc = harness.call("POST", "/query", {"id": created["id"]})
    assert (status, "deleted" in doc["error"]["message"]) == (404, True)
