"""A busy queue's messages spread over partitions (`core/message_partitions.py`): when a queue spreads, and that every
path (create, read, list in each order, cancel, patch, retry, dedup, bulk operation, delete, rollback check) finds
its messages in either layout, due at different times and handed off in any order."""

from __future__ import annotations

import base64
import json

import pytest
from hourglass.core import keys, message_partitions

from devstack.rollback import blockers
from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.integration.test_rollback import deployed

Q = "orders"


def spread(h: Harness, name: str = Q) -> None:
    queue = h.ctx.store.get_queue(name, consistent=True)
    assert queue is not None
    assert h.ctx.store.spread_queue(name, queue.created_at, message_partitions.PARTITIONS)


def stored_pk(h: Harness, message_id: str) -> str | None:
    """The partition the message's item is in, looked up in every partition a queue may have."""
    for pk in keys.message_pks(Q, message_partitions.PARTITIONS):
        key = {"pk": {"S": pk}, "sk": {"S": keys.message_sk(message_id)}}
        if "Item" in h.ddb.get_item(TableName=h.ctx.settings.table, Key=key):
            return pk
    return None


def listed(h: Harness, **params: str) -> list[str]:
    """Every id a list returns, following next_cursor to the end."""
    ids: list[str] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        status, doc = h.call("GET", f"/v1/queues/{Q}/messages", params=query)
        assert status == 200, doc
        ids += [m["id"] for m in doc["messages"]]
        cursor = doc["next_cursor"]
        if cursor is None:
            return ids


def deliver_all(h: Harness) -> None:
    """Sweeps and dispatches until nothing is left to hand off (the latest is due in 10,000 s), an hour a round."""
    for _ in range(3):
        h.dispatch(h.timers())
        h.clock.advance(3600)
        h.sweep()
    h.dispatch(h.timers())


def mixed(h: Harness) -> tuple[list[str], list[str]]:
    """Messages stored before the queue spread and after, each half due soon (handed off) and half far (swept)."""
    make_queue(h)
    before = [m["id"] for m in post(h, *({"body": i, "delay": d} for i, d in enumerate([30, 7200, 60, 9000])))]
    spread(h)
    after = [m["id"] for m in post(h, *({"body": i, "delay": d} for i, d in enumerate([45, 8000, 20, 10000])))]
    return before, after


def test_a_queue_taking_a_partitions_share_in_a_window_spreads(harness: Harness) -> None:
    make_queue(harness)
    for _ in range(message_partitions.SPREAD_AT // 100):
        post(harness, *({"body": i, "delay": 3600} for i in range(100)))
    queue = harness.ctx.store.get_queue(Q, consistent=True)
    [created] = post(harness, {"body": "next", "delay": 3600})
    assert queue is not None and queue.partitions == message_partitions.PARTITIONS
    assert stored_pk(harness, created["id"]) == keys.message_pk(Q, created["id"]) != Q


def test_a_quiet_queue_stays_in_its_partition_and_writes_no_window_record(harness: Harness) -> None:
    make_queue(harness)
    for _ in range(20):
        post(harness, *({"body": i, "delay": 3600} for i in range(message_partitions.REPORT_AT // 2 - 1)))
        harness.clock.advance(message_partitions.WINDOW_SECONDS)
    records = harness.ddb.query(
        TableName=harness.ctx.settings.table,
        KeyConditionExpression="pk = :q AND begins_with(sk, :r)",
        ExpressionAttributeValues={":q": {"S": Q}, ":r": {"S": keys.RATE_PREFIX}},
    )["Items"]
    queue = harness.ctx.store.get_queue(Q, consistent=True)
    assert (records, queue is not None and queue.partitions) == ([], 1)


def test_messages_stored_after_the_spread_are_in_the_spread_partitions(harness: Harness) -> None:
    before, after = mixed(harness)
    assert {stored_pk(harness, i) for i in before} == {Q}
    assert {stored_pk(harness, i) for i in after} == {keys.message_pk(Q, i) for i in after}
    assert Q not in {stored_pk(harness, i) for i in after}


def test_messages_of_both_layouts_are_delivered_once_at_their_due_times(harness: Harness) -> None:
    before, after = mixed(harness)
    deliver_all(harness)
    docs = [get(harness, i) for i in before + after]
    assert {d["status"] for d in docs} == {"delivered"}
    assert all(d["delivered_at"] >= d["due_at"] for d in docs)
    assert len(harness.receiver.requests) == len(before + after)


@pytest.mark.parametrize("order", [None, "due", "created"])
def test_a_list_pages_through_both_layouts_once_each_in_its_order(harness: Harness, order: str | None) -> None:
    before, after = mixed(harness)
    more = [m["id"] for m in post(harness, *({"body": i, "delay": 600 + i} for i in range(12)))]
    params = {"limit": "3", **({"order": order} if order else {})}
    ids = listed(harness, **params)
    docs = {i: get(harness, i) for i in ids}
    # Messages created together (one POST, a fixed clock) tie on created_at: any order among them is right.
    key = {None: lambda i: i, "due": lambda i: (docs[i]["due_at"], i), "created": lambda i: docs[i]["created_at"]}
    assert sorted(ids) == sorted(before + after + more)
    assert [key[order](i) for i in ids] == sorted(key[order](i) for i in ids)


def test_a_status_filtered_list_finds_spread_messages(harness: Harness) -> None:
    before, after = mixed(harness)
    for message_id in (before[1], after[1]):
        assert harness.call("DELETE", f"/v1/queues/{Q}/messages/{message_id}")[0] == 204
    assert sorted(listed(harness, status="cancelled", limit="1")) == sorted([before[1], after[1]])


def test_a_cursor_of_another_queue_is_a_400_naming_cursor(harness: Harness) -> None:
    mixed(harness)
    forged = base64.urlsafe_b64encode(json.dumps({"pk": {"S": "other#3"}, "sk": {"S": "m#ab"}}).encode()).decode()
    status, doc = harness.call("GET", f"/v1/queues/{Q}/messages", params={"cursor": forged})
    assert status == 400 and "cursor" in json.dumps(doc)


def test_a_spread_message_is_cancelled_patched_and_not_delivered_early(harness: Harness) -> None:
    _, after = mixed(harness)
    cancelled, patched = after[1], after[3]
    assert harness.call("DELETE", f"/v1/queues/{Q}/messages/{cancelled}")[0] == 204
    status, doc = harness.call("PATCH", f"/v1/queues/{Q}/messages/{patched}", {"delay": 30})
    assert status == 200
    deliver_all(harness)
    assert get(harness, cancelled)["status"] == "cancelled"
    final = get(harness, patched)
    assert final["status"] == "delivered" and final["due_at"] == doc["due_at"] <= final["delivered_at"]


def test_a_spread_message_is_retried_and_its_attempts_are_listed(harness: Harness) -> None:
    make_queue(harness)
    spread(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 5})
    deliver_all(harness)
    status, doc = harness.call("GET", f"/v1/queues/{Q}/messages/{created['id']}/attempts")
    assert status == 200, doc
    assert get(harness, created["id"])["status"] == "delivered"
    assert [a["attempt"] for a in doc["attempts"]] == [1, 2]


def test_a_dedup_id_repeated_in_a_spread_queue_returns_the_first_message(harness: Harness) -> None:
    make_queue(harness)
    spread(harness)
    [first] = post(harness, {"body": 1, "delay": 600, "dedup_id": "once"})
    [again] = post(harness, {"body": 2, "delay": 600, "dedup_id": "once"})
    assert (again["id"], again["duplicate"]) == (first["id"], True)
    assert listed(harness) == [first["id"]]


def test_a_large_body_of_a_spread_message_is_delivered(harness: Harness) -> None:
    make_queue(harness)
    spread(harness)
    body = {"text": "x" * 200_000}  # a body item of its own, beside the message's
    status, doc = harness.call("POST", f"/v1/queues/{Q}/messages", {"messages": [{"body": body, "delay": 30}]})
    assert status == 201, doc
    [created] = doc["messages"]
    deliver_all(harness)
    bodies = harness.ddb.scan(
        TableName=harness.ctx.settings.table,
        FilterExpression="begins_with(sk, :b)",
        ExpressionAttributeValues={":b": {"S": keys.BODY_PREFIX}},
    )["Items"]
    assert [item["pk"]["S"] for item in bodies] == [keys.message_pk(Q, created["id"])]
    assert harness.receiver.requests[0]["body"] == body


def test_a_bulk_cancel_covers_both_layouts(harness: Harness) -> None:
    before, after = mixed(harness)
    status, started = harness.call("POST", f"/v1/queues/{Q}/operations", {"action": "cancel", "filter": {}})
    assert status == 202
    _, done = harness.call("GET", f"/v1/queues/{Q}/operations/{started['id']}")
    assert (done["status"], done["applied"]) == ("succeeded", len(before + after))
    assert {get(harness, i)["status"] for i in before + after} == {"cancelled"}


def test_deleting_a_spread_queue_cancels_its_pending_messages(harness: Harness) -> None:
    before, after = mixed(harness)
    assert harness.call("DELETE", f"/v1/queues/{Q}")[0] == 204
    deliver_all(harness)
    assert harness.receiver.requests == []
    assert all(harness.ctx.store.get_message(Q, i).status.value == "cancelled" for i in before + after)  # type: ignore[union-attr]


def test_a_put_of_the_queue_keeps_its_spread(harness: Harness) -> None:
    make_queue(harness)
    spread(harness)
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 5}})
    queue = harness.ctx.store.get_queue(Q, consistent=True)
    assert queue is not None and queue.partitions == message_partitions.PARTITIONS


def test_a_rollback_to_1_2_0_is_refused_while_a_queue_is_spread(harness: Harness) -> None:
    make_queue(harness)
    make_queue(harness, "quiet")
    spread(harness)
    found = [b.what for b in blockers(deployed(harness), "v1.2.0")]
    assert len(found) == 1 and "'orders' spreads its messages" in found[0]
