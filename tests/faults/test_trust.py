"""Issue 10's dispatcher, dedup and adapter holes: each test reproduces one and checks it stays closed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.conftest import Faults
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue


def post_dedup(h: Harness, dedup_id: str, queue: str = "orders") -> tuple[int, Any]:
    return h.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1, "dedup_id": dedup_id, "delay": 5}]})


def stored_ids(h: Harness, queue: str = "orders") -> list[str]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/messages")
    assert status == 200, doc
    return [m["id"] for m in doc["messages"]]


def test_throttled_dedup_transaction_is_retried_and_stores_the_new_message(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    faults.ddb.fail(
        "transact_write_items", code="TransactionCanceledException", status=400, reasons=["ThrottlingError", "None"]
    )
    status, doc = post_dedup(harness, "order-1")
    [message] = doc["messages"]
    assert (status, message["duplicate"], stored_ids(harness)) == (201, False, [message["id"]])


def test_dedup_transaction_that_stays_throttled_answers_503_never_a_duplicate(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    faults.ddb.fail(
        "transact_write_items",
        code="TransactionCanceledException",
        status=400,
        reasons=["TransactionConflict", "None"],
        times=None,
    )
    status, doc = post_dedup(harness, "order-1")
    assert (status, doc["error"]["code"] if "error" in doc else doc.get("code"), stored_ids(harness)) == (
        503,
        "unavailable",
        [],
    )


def test_a_live_dedup_record_is_still_a_duplicate(harness: Harness) -> None:
    make_queue(harness)
    _, first = post_dedup(harness, "order-1")
    _, second = post_dedup(harness, "order-1")
    assert (second["messages"][0]["duplicate"], second["messages"][0]["id"]) == (True, first["messages"][0]["id"])


def test_a_recreated_queue_starts_with_no_dedup_history(harness: Harness) -> None:
    make_queue(harness)
    _, first = post_dedup(harness, "order-1")
    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204
    harness.clock.advance(1)
    make_queue(harness)
    _, again = post_dedup(harness, "order-1")
    [message] = again["messages"]
    assert (message["duplicate"], message["id"] != first["messages"][0]["id"]) == (False, True)


@pytest.mark.parametrize("kind", ["connect", "read_timeout", "closed"])
def test_connection_errors_of_dynamodb_answer_503(harness: Harness, faults: Faults, kind: str) -> None:
    make_queue(harness)
    faults.ddb.disconnect("get_item", kind=kind)
    status, _ = harness.call("GET", "/v1/queues/orders")
    assert status == 503


def test_patch_whose_write_committed_before_the_connection_dropped_answers_503_and_the_change_stands(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    _, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "delay": 3600}]})
    message_id = doc["messages"][0]["id"]
    faults.ddb.disconnect("put_item", kind="read_timeout", after=True)
    status, _ = harness.call("PATCH", f"/v1/queues/orders/messages/{message_id}", {"body": 2})
    # The client sees 503 and may retry the PATCH; the write it could not confirm did land.
    assert (status, get(harness, message_id)["body"]) == (503, 2)


def test_refused_timer_on_patch_is_reported_and_the_message_stays_in_the_due_index(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    _, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "delay": 3600}]})
    message_id = doc["messages"][0]["id"]
    faults.sqs.fail("send_message_batch", times=None)
    status, _ = harness.call("PATCH", f"/v1/queues/orders/messages/{message_id}", {"delay": 5})
    item = harness.ddb.get_item(
        TableName=harness.ctx.settings.table, Key={"pk": {"S": "orders"}, "sk": {"S": f"m#{message_id}"}}
    )["Item"]
    assert (status, harness.ctx.metrics.counts["TimerRefused"], "sweep_pk" in item) == (200, 1, True)
