"""Issue 10's dispatcher, dedup and adapter holes: each test reproduces one and checks it stays closed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hourglass.core.timestamps import from_ms
from hourglass.handlers import dispatcher as dispatcher_handler
from hourglass.service.dispatch import Dispatcher

from tests.faults.conftest import Faults
from tests.faults.proxies import Crash, timer_ids
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


# dispatcher -------------------------------------------------------------------------------


def post_two(h: Harness) -> tuple[str, str]:
    _, doc = h.call(
        "POST",
        "/v1/queues/orders/messages",
        {"messages": [{"body": "bad", "delay": 5}, {"body": "good", "delay": 5}]},
    )
    return doc["messages"][0]["id"], doc["messages"][1]["id"]


def one_batch(h: Harness, timers: list[dict[str, Any]], deadline: Any = None) -> list[str]:
    """All timers in one SQS batch, once the last is visible on the fake clock."""
    h.clock.now = max(h.clock.now, max(from_ms(t["json"]["due"]) for t in timers) - timedelta(seconds=1))
    return Dispatcher(h.ctx).run_batch([(t["record"], t["body"]) for t in timers], deadline)


def test_an_exception_in_one_delivery_fails_that_message_only(harness: Harness) -> None:
    make_queue(harness)
    bad, good = post_two(harness)
    real = harness.ctx.post

    def post(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> Any:
        if b'"bad"' in body:
            raise UnicodeEncodeError("latin-1", "é", 0, 1, "ordinal not in range(256)")
        return real(url, body, headers, **kwargs)

    harness.ctx.post = post
    failures = one_batch(harness, harness.timers())
    bad_doc, good_doc = get(harness, bad), get(harness, good)
    assert (failures, bad_doc["status"], good_doc["status"]) == ([], "failed", "delivered")
    assert "UnicodeEncodeError" in bad_doc["last_error"]


def test_an_unexpected_store_exception_for_one_message_leaves_batch_mates_alone(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    bad, good = post_two(harness)
    timers = harness.timers()

    def boom() -> None:
        raise RuntimeError("programming error")

    faults.ddb.before("update_item", boom)
    failures = one_batch(harness, timers)
    statuses = sorted(get(harness, i)["status"] for i in (bad, good))
    # The one that raised is left for SQS to redeliver (pending, untouched); the other is delivered.
    assert (len(failures), statuses) == (1, ["delivered", "pending"])


def test_dispatcher_starts_no_attempt_it_cannot_finish_before_its_deadline(harness: Harness) -> None:
    make_queue(harness)
    [created] = post_many(harness, 1)
    timers = harness.timers()
    deadline = harness.clock.now + timedelta(seconds=10)
    failures = one_batch(harness, timers, deadline)
    again = harness.timers()
    assert (failures, get(harness, created)["status"], harness.receiver.requests) == ([], "pending", [])
    assert timer_ids(again) == [created]


def post_many(h: Harness, count: int, delay: float = 5) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 100):
        size = min(100, count - start)
        _, doc = h.call(
            "POST", "/v1/queues/orders/messages", {"messages": [{"body": i, "delay": delay} for i in range(size)]}
        )
        ids.extend(m["id"] for m in doc["messages"])
    return ids


def dlq_event(h: Harness, body: str, receives: int = 11) -> dict[str, Any]:
    name = h.ctx.settings.timer_dlq_url.rsplit("/", 1)[-1]
    return {
        "Records": [
            {
                "messageId": "r1",
                "body": body,
                "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{name}",
                "attributes": {"ApproximateReceiveCount": str(receives)},
            }
        ]
    }


def test_a_dead_lettered_timer_fails_its_stuck_delivering_message_with_a_reason(harness: Harness) -> None:
    make_queue(harness)
    [created] = post_many(harness, 1)
    [timer] = harness.timers()
    harness.ctx.settings = replace(harness.ctx.settings, timer_dlq_url="http://127.0.0.1/123456789012/timer-dlq")

    def die(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> Any:
        raise Crash("dispatcher killed mid-delivery")

    harness.ctx.post = die
    with pytest.raises(Crash):
        harness.dispatch([timer])
    assert get(harness, created)["status"] == "delivering"
    harness.clock.advance(3600)
    answer = dispatcher_handler.handle(Dispatcher(harness.ctx), dlq_event(harness, timer["body"]))
    doc = get(harness, created)
    assert (answer["batchItemFailures"], doc["status"], doc["last_error"]) == (
        [],
        "failed",
        "timer dead-lettered after 11 receives",
    )
    assert harness.ctx.metrics.counts["TimerDeadLettered"] == 1


def test_a_dead_lettered_timer_of_a_message_that_moved_on_changes_nothing(harness: Harness) -> None:
    make_queue(harness)
    [created] = post_many(harness, 1)
    [timer] = harness.timers()
    harness.dispatch([timer])
    harness.ctx.settings = replace(harness.ctx.settings, timer_dlq_url="http://127.0.0.1/123456789012/timer-dlq")
    dispatcher_handler.handle(Dispatcher(harness.ctx), dlq_event(harness, timer["body"]))
    assert get(harness, created)["status"] == "delivered"


# DELETE queue and listing -----------------------------------------------------------------


def test_delete_queue_cancels_every_pending_message_not_only_the_first_500(harness: Harness) -> None:
    make_queue(harness)
    ids = post_many(harness, 650, delay=3600)
    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204
    make_queue(harness)
    statuses = {get(harness, i)["status"] for i in ids}
    assert statuses == {"cancelled"}


def test_nothing_is_delivered_after_delete_queue_even_by_a_dispatcher_that_read_the_queue(
    harness: Harness,
) -> None:
    make_queue(harness)
    [first] = post_many(harness, 1)
    [second] = post_many(harness, 1, delay=10)
    timers = sorted(harness.timers(), key=lambda t: timer_ids([t]) == [second])
    dispatcher = Dispatcher(harness.ctx)
    # This dispatcher (a warm Lambda) read the queue for the first message ...
    harness.clock.now = max(harness.clock.now, from_ms(timers[0]["json"]["due"]) - timedelta(seconds=1))
    dispatcher.run_batch([(timers[0]["record"], timers[0]["body"])])
    # ... the second message is left behind by DELETE's cancel pass (it was mid-hand-off) ...
    harness.ctx.store.delete_queue("orders")
    harness.clock.now = from_ms(timers[1]["json"]["due"]) - timedelta(seconds=1)
    dispatcher.run_batch([(timers[1]["record"], timers[1]["body"])])
    assert [get_raw(harness, i) for i in (first, second)] == ["delivered", "cancelled"]


def get_raw(h: Harness, message_id: str) -> str:
    message = h.ctx.store.get_message("orders", message_id)
    assert message is not None
    return message.status.value


class CountingClient:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        if name == "query":
            self.queries += 1
        return getattr(self._client, name)


def test_status_filtered_listing_costs_a_handful_of_queries_not_one_per_item(harness: Harness) -> None:
    make_queue(harness)
    post_many(harness, 300, delay=3600)
    counting = CountingClient(harness.ctx.store.client)
    harness.ctx.store.client = counting
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"status": "delivered", "limit": "50"})
    assert (status, doc["messages"], counting.queries <= 5) == (200, [], True)


def test_status_filtered_listing_returns_what_matches_across_pages(harness: Harness) -> None:
    make_queue(harness)
    ids = post_many(harness, 120, delay=3600)
    for message_id in ids[::3]:
        harness.call("DELETE", f"/v1/queues/orders/messages/{message_id}")
    seen: list[str] = []
    params = {"status": "cancelled", "limit": "7"}
    while True:
        status, doc = harness.call("GET", "/v1/queues/orders/messages", params=params)
        assert status == 200
        seen.extend(m["id"] for m in doc["messages"])
        if not doc.get("next_cursor"):
            break
        params = {**params, "cursor": doc["next_cursor"]}
    assert sorted(seen) == sorted(ids[::3])


# sweep ------------------------------------------------------------------------------------


def test_first_sweep_of_a_stack_covers_what_was_indexed_long_before(harness: Harness) -> None:
    make_queue(harness)
    [old] = post_many(harness, 1, delay=3600)
    # No sweeper ran for the stack's first hours: the message is two hours overdue at the first sweep.
    harness.clock.advance(3 * 3600)
    report = harness.sweep()
    assert (report.handed_off, timer_ids(harness.timers())) == (1, [old])


def test_first_sweep_reads_only_buckets_that_hold_entries(harness: Harness) -> None:
    make_queue(harness)
    post_many(harness, 1, delay=3600)
    harness.clock.advance(7 * 24 * 3600)
    counting = CountingClient(harness.ctx.store.client)
    harness.ctx.store.client = counting
    harness.sweep()
    shards = harness.ctx.settings.shards
    # The old bucket and the ~15 recent ones (initial window + lookahead), per shard: not a week of buckets.
    assert counting.queries <= shards * 30


def test_lookahead_of_900_keeps_the_hand_off_safety_margin(harness: Harness) -> None:
    harness.ctx.settings = replace(harness.ctx.settings, lookahead=900.0)
    timing = harness.ctx.settings.timing
    assert timing.sweep_ahead + timing.safety <= 900


def test_a_write_in_flight_during_a_sweep_is_swept_next_time_with_lookahead_900(harness: Harness) -> None:
    harness.ctx.settings = replace(harness.ctx.settings, lookahead=900.0)
    make_queue(harness)
    started = harness.clock.now
    harness.clock.advance(1)
    harness.sweep()
    # An ingest that started before that sweep lands after it, due just past its hand-off window.
    harness.clock.now = started
    [late] = post_many(harness, 1, delay=900.5)
    assert harness.timers() == []
    harness.clock.advance(61)
    harness.sweep()
    assert timer_ids(harness.timers()) == [late]


def test_lowering_the_lookahead_between_deployments_strands_nothing(harness: Harness) -> None:
    make_queue(harness)
    harness.ctx.settings = replace(harness.ctx.settings, lookahead=800.0)
    harness.sweep()
    harness.ctx.settings = replace(harness.ctx.settings, lookahead=120.0)
    harness.clock.advance(5)
    # Due after the new hand-off window but before the watermark the old deployment stored.
    [message] = post_many(harness, 1, delay=400)
    assert harness.timers() == []
    harness.clock.advance(300)
    harness.sweep()
    assert timer_ids(harness.timers()) == [message]


def slow_writes(harness: Harness, seconds: float) -> Any:
    """Message writes that stay in flight for `seconds` (retries of a throttled table), with a sweep
    running meanwhile, before the write lands."""
    put = harness.ctx.store.put_messages

    def slow_put(entries: Any) -> None:
        harness.clock.advance(seconds)
        harness.sweep()
        put(entries)

    return slow_put


def test_a_write_slower_than_the_safety_margin_is_handed_off_by_its_writer(harness: Harness) -> None:
    make_queue(harness)
    timing = harness.ctx.settings.timing
    harness.ctx.store.put_messages = slow_writes(harness, timing.safety + 2)  # type: ignore[method-assign]
    # Indexed when the request started; by the time the write lands the sweep has passed its due time.
    [late] = post_many(harness, 1, delay=timing.sweep_ahead + timing.safety + 1)
    assert timer_ids(harness.timers()) == [late]


def test_a_write_faster_than_the_safety_margin_leaves_its_message_to_the_sweep(harness: Harness) -> None:
    """Due just past the hand-off window when the request started and inside it when the write landed:
    no sweep could have passed it, so its writer claims nothing (a claim would cost the sweep a failed one)."""
    make_queue(harness)
    timing = harness.ctx.settings.timing
    put = harness.ctx.store.put_messages

    def quick_put(entries: Any) -> None:
        harness.clock.advance(0.5)
        put(entries)

    harness.ctx.store.put_messages = quick_put  # type: ignore[method-assign]
    post_many(harness, 1, delay=timing.sweep_ahead + timing.safety + 0.2)
    assert harness.timers() == []


def test_a_slow_write_handed_off_by_its_writer_is_not_handed_off_again_by_the_sweep(harness: Harness) -> None:
    make_queue(harness)
    timing = harness.ctx.settings.timing
    harness.ctx.store.put_messages = slow_writes(harness, timing.safety + 2)  # type: ignore[method-assign]
    post_many(harness, 1, delay=timing.sweep_ahead + timing.safety + 1)
    harness.timers()
    harness.clock.advance(5)  # past its due time, within the writer's claim
    harness.sweep()
    assert harness.timers() == []
