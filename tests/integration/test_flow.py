"""The data path under mock_aws with a fixed clock: ingest, sweep, dispatch, outcomes."""

from __future__ import annotations

from typing import Any

import pytest
from hourglass.service.sweep import Sweeper

from tests.integration.conftest import Harness

HTTP_QUEUE = {"target": {"type": "http", "url": "http://127.0.0.1:9/hook"}, "retry": {"max_attempts": 3}}
# A queue using an opt-in feature: the sweep claims its messages (`delivery_control.claims_hand_offs`).
CLAIMED_QUEUE = {**HTTP_QUEUE, "max_concurrency": 1000}


def make_queue(h: Harness, name: str = "orders", settings: dict[str, Any] | None = None) -> None:
    status, _ = h.call("PUT", f"/v1/queues/{name}", settings if settings is not None else HTTP_QUEUE)
    assert status in (200, 201)


def post(h: Harness, *messages: dict[str, Any], queue: str = "orders") -> list[dict[str, Any]]:
    status, doc = h.call("POST", f"/v1/queues/{queue}/messages", {"messages": list(messages)})
    assert status == 201, doc
    return list(doc["messages"])


def get(h: Harness, message_id: str, queue: str = "orders") -> dict[str, Any]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
    assert status == 200, doc
    return dict(doc)


def test_message_due_soon_is_handed_to_the_timer_queue_at_ingest(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": {"n": 1}, "delay": 30})
    timers = harness.timers()
    assert [t["json"]["id"] for t in timers] == [created["id"]]


def test_handed_off_message_is_delivered_at_its_due_time(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": {"n": 1}, "delay": 30})
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert doc["status"] == "delivered"
    assert doc["delivered_at"] >= doc["due_at"]
    assert harness.receiver.requests[0]["body"] == {"n": 1}


def test_message_due_later_waits_in_the_due_index(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": "later", "delay": 3600})
    index = harness.ddb.scan(TableName="messages", IndexName="due")["Items"]
    assert harness.timers() == []
    assert [item["sweep_sk"]["S"].split("#")[1] for item in index] == [created["id"]]


def test_sweep_hands_off_only_what_is_due_within_the_lookahead(harness: Harness) -> None:
    make_queue(harness)
    [soon] = post(harness, {"body": 1, "delay": 600})
    post(harness, {"body": 2, "delay": 7200})
    harness.clock.advance(400)
    report = harness.sweep()
    assert report.handed_off == 1
    assert [t["json"]["id"] for t in harness.timers()] == [soon["id"]]


def test_swept_message_is_delivered_and_leaves_the_due_index(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    harness.sweep()
    harness.dispatch(harness.timers())
    assert get(harness, created["id"])["status"] == "delivered"
    index = harness.ddb.scan(TableName="messages", IndexName="due")
    assert index["Count"] == 0


@pytest.mark.parametrize(("settings", "again"), [(CLAIMED_QUEUE, 0), (HTTP_QUEUE, 1)], ids=["claimed", "unclaimed"])
def test_two_sweeps_deliver_a_message_once(harness: Harness, settings: dict[str, Any], again: int) -> None:
    """Claimed, the second sweep leaves it; unclaimed, it sends a second timer, which starts nothing."""
    make_queue(harness, settings=settings)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    first = harness.sweep()
    # a second sweeper that has not seen the watermark move: reset it
    harness.ddb.delete_item(TableName="messages", Key={"pk": {"S": "@sweeper"}, "sk": {"S": "#state"}})
    second = harness.sweep()
    harness.dispatch(harness.timers())
    assert (first.handed_off, second.handed_off) == (1, again)
    assert get(harness, created["id"])["status"] == "delivered" and len(harness.receiver.requests) == 1


def test_cancelled_message_is_not_delivered(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 30})
    status, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    harness.dispatch(harness.timers())
    assert status == 204
    assert get(harness, created["id"])["status"] == "cancelled"
    assert harness.receiver.requests == []


def test_rescheduled_message_is_delivered_once_at_the_new_time(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 30})
    status, patched = harness.call("PATCH", f"/v1/queues/orders/messages/{created['id']}", {"delay": 60})
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert status == 200
    assert doc["status"] == "delivered" and doc["due_at"] == patched["due_at"]
    assert len(harness.receiver.requests) == 1


def test_failed_attempt_is_retried_after_backoff(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 5})
    harness.dispatch(harness.timers())
    after_first = get(harness, created["id"])
    harness.dispatch(harness.timers())
    final = get(harness, created["id"])
    assert (after_first["status"], after_first["attempts"], after_first["last_error"]) == ("pending", 1, "HTTP 503")
    assert (final["status"], final["attempts"]) == ("delivered", 2)


def test_retries_stop_after_max_attempts(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [500, 500, 500]
    [created] = post(harness, {"body": 1})
    for _ in range(3):
        harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert (doc["status"], doc["attempts"]) == ("failed", 3)


def test_client_error_fails_without_retry(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [404]
    [created] = post(harness, {"body": 1})
    harness.dispatch(harness.timers())
    assert harness.timers() == []
    assert get(harness, created["id"])["status"] == "failed"


def test_sqs_target_gets_the_envelope(harness: Harness) -> None:
    target_url = harness.sqs.create_queue(QueueName="target")["QueueUrl"]
    make_queue(harness, settings={"target": {"type": "sqs", "queue_url": target_url}})
    [created] = post(harness, {"body": {"a": 1}, "delay": 2})
    harness.dispatch(harness.timers())
    [envelope] = harness.target_messages(target_url)
    assert envelope == {
        "id": created["id"],
        "queue": "orders",
        "body": {"a": 1},
        "due_at": created["due_at"],
        "attempt": 1,
    }


def test_ttl_shorter_than_delay_expires_without_delivery(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 60, "ttl": 10})
    harness.dispatch(harness.timers())
    assert get(harness, created["id"])["status"] == "expired"
    assert harness.receiver.requests == []


def test_dedup_id_returns_the_first_message(harness: Harness) -> None:
    make_queue(harness)
    [first] = post(harness, {"body": 1, "dedup_id": "order-42", "delay": 100})
    [second] = post(harness, {"body": 2, "dedup_id": "order-42"})
    assert (second["id"], second["duplicate"]) == (first["id"], True)


def test_deleting_a_queue_cancels_its_pending_messages(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5000})
    status, _ = harness.call("DELETE", "/v1/queues/orders")
    message = harness.ctx.store.get_message("orders", created["id"])
    assert status == 204
    assert message is not None and message.status.value == "cancelled"


def test_list_filters_by_status_and_pages_with_a_cursor(harness: Harness) -> None:
    make_queue(harness)
    created = post(harness, *({"body": i, "delay": 3000} for i in range(5)))
    harness.call("DELETE", f"/v1/queues/orders/messages/{created[0]['id']}")
    seen: list[str] = []
    cursor = None
    while True:
        params = {"status": "pending", "limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = harness.call("GET", "/v1/queues/orders/messages", params=params)
        assert status == 200
        seen.extend(m["id"] for m in page["messages"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(m["id"] for m in created[1:])


def test_later_task_is_called_back_and_queryable(harness: Harness) -> None:
    task = {"topic": "order", "delay": 15, "retry": 3, "callback": "http://127.0.0.1:9/", "content": "hi"}
    status, created = harness.call("POST", "/create", task)
    harness.dispatch(harness.timers())
    _, queried = harness.call("POST", "/query", {"id": created["id"]})
    assert status == 200
    assert harness.receiver.requests[0]["body"] == {"id": created["id"], "topic": "order", "content": "hi"}
    assert (queried["topic"], queried["max_retry"], queried["content"]) == ("order", 3, "hi")


def test_sweep_out_of_time_stops_and_the_next_run_continues(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    cut_short = Sweeper(harness.ctx).run(time_left=lambda: 5.0)
    resumed = Sweeper(harness.ctx).run()
    assert (cut_short.complete, cut_short.handed_off) == (False, 0)
    assert resumed.handed_off == 1
