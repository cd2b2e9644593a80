"""Counts added up per batch (issue 35): a dispatcher batch's status changes are written together when it ends, a
request's new messages on one counter item, and the queue document says how old its counts may be."""

from __future__ import annotations

import threading
from datetime import timedelta

from hourglass.adapters.message_storage import COUNT_FLUSH_SECONDS
from hourglass.core.keys import COUNT_PREFIX
from hourglass.core.timestamps import parse_rfc3339

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue, post
from tests.integration.test_operator_reads import counts


def counter_items(h: Harness) -> int:
    got = h.ddb.query(
        TableName=h.ctx.settings.table,
        KeyConditionExpression="pk = :q AND begins_with(sk, :c)",
        ExpressionAttributeValues={":q": {"S": "orders"}, ":c": {"S": COUNT_PREFIX}},
    )
    return len(got["Items"])


def test_changes_counted_together_are_in_the_counts_once_the_batch_ends(harness: Harness) -> None:
    make_queue(harness)
    [message] = post(harness, {"body": 1, "delay": 3000})
    with harness.ctx.store.counts_batched():
        harness.call("DELETE", f"/v1/queues/orders/messages/{message['id']}")
        during = counts(harness)
    assert (during["pending"], during["cancelled"]) == (1, 0)
    assert (counts(harness)["pending"], counts(harness)["cancelled"]) == (0, 1)


def test_a_change_outside_a_batchs_threads_is_counted_at_once(harness: Harness) -> None:
    make_queue(harness)
    [message] = post(harness, {"body": 1, "delay": 3000})
    entered, done = threading.Event(), threading.Event()

    def batch() -> None:
        with harness.ctx.store.counts_batched():
            entered.set()
            done.wait(10)

    other = threading.Thread(target=batch)
    other.start()
    try:
        entered.wait(10)
        harness.call("DELETE", f"/v1/queues/orders/messages/{message['id']}")
        assert counts(harness)["cancelled"] == 1
    finally:
        done.set()
        other.join()


def test_a_dispatched_batch_moves_its_messages_from_pending_to_delivered(harness: Harness) -> None:
    make_queue(harness)
    post(harness, *({"body": n, "delay": 30} for n in range(5)))
    harness.dispatch(harness.timers())
    assert (counts(harness)["pending"], counts(harness)["delivering"], counts(harness)["delivered"]) == (0, 0, 5)


def test_a_request_of_many_messages_is_counted_on_one_counter_item(harness: Harness) -> None:
    make_queue(harness)
    post(harness, *({"body": n, "delay": 3000} for n in range(20)))
    assert counter_items(harness) == 1
    assert counts(harness)["pending"] == 20


def test_the_queue_document_says_how_old_its_counts_may_be(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("GET", "/v1/queues/orders")
    assert status == 200
    assert parse_rfc3339(doc["counts_as_of"]) == harness.clock.now - timedelta(seconds=COUNT_FLUSH_SECONDS)
