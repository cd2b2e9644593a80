"""Ordered delivery per key (contract v1.3) through the services on a fake clock: the queue setting, one message of a
key at a time in due order, keys independent, hold and release, `blocked_by` and the key's state."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hourglass.core import deadline
from hourglass.core import ordering as core_ordering
from hourglass.core.delivery_control import MAX_TIMEOUT
from hourglass.core.keys import ORDER_PREFIX
from hourglass.core.model import Ordering
from hourglass.core.timestamps import format_rfc3339, from_ms
from hourglass.service import ordering as ordering_service
from hourglass.service.dispatch import Dispatcher
from moto.sqs import models as sqs_models

from pipeline.deployment import Deployment
from pipeline.planner import STRICT, Planner
from pipeline.table import Planned, TableWriter
from tests.faults.proxies import Crash
from tests.integration.conftest import Harness
from tests.integration.test_crash_recovery import dies_once, invoke, receive
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post

ORDERED = {**HTTP_QUEUE, "retry": {"max_attempts": 3, "backoff_base": 10}, "ordering": {"by": "flow_key"}}
HOLD = {**ORDERED, "retry": {"max_attempts": 1}, "ordering": {"by": "flow_key", "on_failure": "hold"}}


def error_field(doc: Any) -> str:
    return str(doc["error"]["message"]).split(":")[0]


def delivered(h: Harness) -> list[int]:
    """The bodies the target received, in order."""
    return [r["body"]["n"] if isinstance(r["body"], dict) else r["body"] for r in h.receiver.requests]


def step(h: Harness, rounds: int = 6, within: float = 3.0) -> None:
    """Dispatches the timers due within `within` seconds, round after round (a woken message's timer comes at
    once); the later ones go back to the timer queue."""
    for _ in range(rounds):
        horizon = (h.clock.now.timestamp() + within) * 1000
        drained = h.timers()
        later = [t for t in drained if t["json"]["due"] > horizon]
        for timer in later:
            h.sqs.send_message(QueueUrl=h.ctx.settings.timer_queue_url, MessageBody=timer["body"])
        timers = [t for t in drained if t["json"]["due"] <= horizon]
        if not timers:
            return
        h.dispatch(timers)


def advance(h: Harness, seconds: float) -> None:
    h.clock.now += timedelta(seconds=seconds)


def key(h: Harness, flow_key: str, queue: str = "orders") -> dict[str, Any]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/keys/{flow_key}")
    assert status == 200, doc
    return dict(doc)


# the setting --------------------------------------------------------------------------------
def test_the_queue_shows_its_ordering_with_continue_by_default(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    _, doc = harness.call("GET", "/v1/queues/orders")
    assert doc["ordering"] == {"by": "flow_key", "on_failure": "continue"}


def test_a_queue_without_ordering_shows_none(harness: Harness) -> None:
    make_queue(harness)
    _, doc = harness.call("GET", "/v1/queues/orders")
    assert doc["ordering"] is None


def test_ordering_by_anything_else_is_a_400_naming_it(harness: Harness) -> None:
    status, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "ordering": {"by": "priority"}})
    assert (status, error_field(doc)) == (400, "ordering.by")


def test_a_bad_on_failure_is_a_400_naming_it(harness: Harness) -> None:
    bad = {**HTTP_QUEUE, "ordering": {"by": "flow_key", "on_failure": "stop"}}
    status, doc = harness.call("PUT", "/v1/queues/orders", bad)
    assert (status, error_field(doc)) == (400, "ordering.on_failure")


def test_an_unknown_ordering_field_is_a_400(harness: Harness) -> None:
    bad = {**HTTP_QUEUE, "ordering": {"by": "flow_key", "strict": True}}
    status, _ = harness.call("PUT", "/v1/queues/orders", bad)
    assert status == 400


# one at a time, in due order ----------------------------------------------------------------
def test_a_retrying_head_keeps_the_next_message_of_its_key_waiting(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500, 200, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    assert delivered(harness) == [1]
    advance(harness, 30)
    harness.sweep()
    step(harness)
    assert delivered(harness) == [1, 1, 2]


def test_a_waiting_message_shows_what_it_waits_behind(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    first, second = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2}
    )
    step(harness)
    assert (get(harness, second["id"])["blocked_by"], get(harness, first["id"])["blocked_by"]) == (first["id"], None)
    assert key(harness, "k") == {"flow_key": "k", "head": first["id"], "waiting": 1, "held": False}


def test_keys_are_independent(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "a", "delay": 1}, {"body": {"n": 2}, "flow_key": "b", "delay": 2})
    step(harness)
    assert delivered(harness) == [1, 2]


def test_messages_without_a_key_share_one(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500, 200, 200]
    post(harness, {"body": {"n": 1}, "delay": 1}, {"body": {"n": 2}, "delay": 2})
    step(harness)
    assert delivered(harness) == [1]


def test_a_message_due_earlier_goes_before_one_waiting(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    start = harness.clock.now
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 3})
    step(harness)
    # Created after 2 waits, due before it.
    post(harness, {"body": {"n": 3}, "flow_key": "k", "deliver_at": format_rfc3339(start + timedelta(seconds=2))})
    step(harness)
    advance(harness, 30)
    harness.sweep()
    step(harness)
    assert delivered(harness) == [1, 1, 3, 2]


def test_cancelling_the_head_lets_the_next_start(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    first, _ = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2}
    )
    step(harness)
    status, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{first['id']}")
    step(harness)
    assert (status, delivered(harness)) == (204, [1, 2])


def test_the_next_starts_after_a_failure_with_continue(harness: Harness) -> None:
    make_queue(harness, settings={**ORDERED, "retry": {"max_attempts": 1}})
    harness.receiver.answers = [500, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    assert delivered(harness) == [1, 2]


# hold and release ---------------------------------------------------------------------------
def test_a_failure_holds_the_key_with_hold(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    harness.receiver.answers = [500, 200]
    first, second = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2}
    )
    step(harness)
    assert (delivered(harness), get(harness, second["id"])["status"]) == ([1], "pending")
    assert key(harness, "k") == {"flow_key": "k", "head": first["id"], "waiting": 1, "held": True}


def test_a_release_lets_a_held_key_go_on(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    harness.receiver.answers = [500, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/keys/k/release")
    step(harness)
    assert (status, doc["held"], delivered(harness)) == (200, False, [1, 2])


def test_releasing_a_key_that_holds_nothing_is_a_404(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    status, _ = harness.call("POST", "/v1/queues/orders/keys/k/release")
    assert status == 404


def test_a_held_key_goes_on_once_its_failed_message_is_redelivered_and_ends(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    harness.receiver.answers = [500, 200, 200]
    first, _ = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2}
    )
    step(harness)
    status, _ = harness.call("POST", f"/v1/queues/orders/messages/{first['id']}/redeliver")
    step(harness)
    assert (status, delivered(harness), key(harness, "k")["held"]) == (200, [1, 1, 2], False)


def test_an_idle_key_keeps_nothing(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1})
    step(harness)
    assert key(harness, "k") == {"flow_key": "k", "head": None, "waiting": 0, "held": False}
    assert harness.ctx.store.key_orders("orders") == []


# changing the setting -----------------------------------------------------------------------
def test_removing_ordering_starts_the_waiting_messages(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    make_queue(harness, settings={k: v for k, v in ORDERED.items() if k != "ordering"})
    step(harness)
    assert delivered(harness) == [1, 2]


def test_a_queue_without_ordering_writes_no_key_items(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [500, 200]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    assert (delivered(harness)[:2], harness.ctx.store.key_orders("orders")) == ([1, 2], [])


# crashes ------------------------------------------------------------------------------------
@pytest.fixture
def crashing(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """SQS on the harness's clock with the stack's visibility timeout (as `test_crash_recovery.h`)."""
    monkeypatch.setattr(sqs_models, "unix_time_millis", lambda: harness.clock.now.timestamp() * 1000)
    monkeypatch.setattr(sqs_models, "unix_time", lambda: harness.clock.now.timestamp())
    visibility = deadline.visibility_timeout(MAX_TIMEOUT)
    url = harness.ctx.settings.timer_queue_url
    harness.sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": str(visibility)})
    return harness


def test_a_head_whose_dispatcher_died_mid_attempt_is_taken_over_before_the_next_starts(crashing: Harness) -> None:
    """The head's dispatcher dies mid-attempt: its key's next message waits until the takeover has ended it."""
    h = crashing
    make_queue(h, settings=ORDERED)
    first = {"body": {"n": 1}, "flow_key": "k", "delay": 5}
    _, second = post(h, first, {"body": {"n": 2}, "flow_key": "k", "delay": 6})
    h.ctx.post = dies_once(h.ctx.post)
    for _ in range(120):  # SQS's event source polls all the while
        h.clock.advance(1)
        with contextlib.suppress(Crash):
            invoke(h, receive(h))
    assert (delivered(h), get(h, second["id"])["status"]) == ([1, 2], "delivered")


def test_a_schedules_occurrences_take_their_turn_in_their_key(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1})
    step(harness)
    start_at = format_rfc3339(harness.clock.now + timedelta(seconds=2))
    schedule = {"every": 3600, "start_at": start_at, "body": {"n": 2}, "flow_key": "k"}
    status, _ = harness.call("PUT", "/v1/queues/orders/schedules/s", schedule)
    step(harness)
    assert (status, delivered(harness)) == (201, [1])
    advance(harness, 30)
    harness.sweep()
    step(harness)
    assert delivered(harness)[:3] == [1, 1, 2]


# pause and the queue's lifetime -------------------------------------------------------------
def test_a_paused_ordered_queue_starts_nothing_and_goes_on_in_order_after_the_resume(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.call("POST", "/v1/queues/orders/pause")
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    assert delivered(harness) == []
    harness.call("POST", "/v1/queues/orders/resume")
    advance(harness, 3)
    step(harness)
    assert delivered(harness) == [1, 2]


def test_a_deleted_queue_leaves_no_key_behind(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    harness.receiver.answers = [500]
    post(harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2})
    step(harness)
    status, _ = harness.call("DELETE", "/v1/queues/orders")
    make_queue(harness, settings=HOLD)
    assert (status, key(harness, "k")["held"], harness.ctx.store.key_orders("orders")) == (204, False, [])


def test_a_message_patched_later_before_its_start_lets_the_next_go(harness: Harness) -> None:
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    first, second, third = post(
        harness,
        {"body": {"n": 1}, "flow_key": "k", "delay": 1},
        {"body": {"n": 2}, "flow_key": "k", "delay": 2},
        {"body": {"n": 3}, "flow_key": "k", "delay": 3},
    )
    step(harness)
    status, _ = harness.call("PATCH", f"/v1/queues/orders/messages/{second['id']}", {"delay": 3600})
    status_cancel, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{first['id']}")
    step(harness)
    assert (status, status_cancel, delivered(harness), get(harness, third["id"])["status"]) == (
        200,
        204,
        [1, 3],
        "delivered",
    )


def test_a_head_ended_but_not_yet_handed_on_is_ended_by_the_next_arrival_which_wakes_the_waiter(
    harness: Harness,
) -> None:
    """The head's end is written, its key's write not yet (a writer under way or dead): the next message to reach
    its start hands the key to the first waiter and wakes it."""
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500]
    first, second = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 2}
    )
    step(harness)
    after_end = ordering_service.after_end
    ordering_service.after_end = lambda *args: None  # type: ignore[assignment]
    try:
        status, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{first['id']}")
    finally:
        ordering_service.after_end = after_end  # type: ignore[assignment]
    [third] = post(harness, {"body": {"n": 3}, "flow_key": "k"})
    message = harness.ctx.store.get_message("orders", third["id"])
    assert message is not None
    turn = ordering_service.take_turn(harness.ctx, message, Ordering(), harness.clock.now)
    assert (status, turn.starts, turn.woken, key(harness, "k")["head"]) == (204, False, second["id"], second["id"])


def test_a_bulk_loaded_key_takes_its_turn_as_posted_messages_do(harness: Harness) -> None:
    """The Spark job's rows (planned by `pipeline.planner`, written by `pipeline.table`) are plain pending messages:
    their key's order is decided at their starts, as for messages posted one by one."""
    make_queue(harness, settings=ORDERED)
    harness.receiver.answers = [500, 200, 200]
    queue = harness.ctx.store.get_queue("orders")
    assert queue is not None
    stack = replace(STRICT, allow_private_callbacks=True)
    planner = Planner({"orders": queue}, harness.clock.now, "rows.csv", stack=stack)
    rows = [{"queue": "orders", "body": {"n": n}, "flow_key": "k", "delay": n} for n in (2, 1)]
    plans = [planner.plan(i, json.dumps(row)) for i, row in enumerate(rows, 1)]
    deployment = Deployment(table=harness.ctx.settings.table, timer_queue_url=harness.ctx.settings.timer_queue_url)
    writer = TableWriter(deployment, harness.clock.now, client=harness.ddb, clock=lambda: harness.clock.now)
    writer.write_all(Planned(*plan[:8]) for plan in plans)  # type: ignore[arg-type]
    step(harness)
    assert delivered(harness) == [1]
    advance(harness, 30)
    harness.sweep()
    step(harness)
    assert delivered(harness) == [1, 1, 2]


def test_the_key_of_messages_without_a_flow_key_is_reached_by_an_empty_path_segment(harness: Harness) -> None:
    make_queue(harness, settings=HOLD)
    harness.receiver.answers = [500, 200]
    first, _ = post(harness, {"body": {"n": 1}, "delay": 1}, {"body": {"n": 2}, "delay": 2})
    step(harness)
    held = key(harness, "")
    status, doc = harness.call("POST", "/v1/queues/orders/keys//release")
    step(harness)
    assert (held["head"], held["held"], status, doc["held"], delivered(harness)) == (
        first["id"],
        True,
        200,
        False,
        [1, 2],
    )


# a long line: overflow items ----------------------------------------------------------------
LONG = 12  # three times the key item's waiters below


@pytest.fixture
def short_items(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """A key's item keeps 4 waiters: a line of LONG spills 8 to overflow items."""
    monkeypatch.setattr(core_ordering, "INLINE", 4)
    return harness


def order_items(h: Harness, queue: str = "orders") -> list[str]:
    """The sort keys of the queue's order items (keys' and overflow ones)."""
    got = h.ddb.query(
        TableName=h.ctx.settings.table,
        KeyConditionExpression="pk = :q AND begins_with(sk, :o)",
        ExpressionAttributeValues={":q": {"S": queue}, ":o": {"S": ORDER_PREFIX}},
        ConsistentRead=True,
    )
    return [item["sk"]["S"] for item in got["Items"]]


def held_with_a_long_line(h: Harness, *late: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Message 0 fails and holds key k; messages 1..LONG (due 1 s apart after it) wait behind it. The `late`
    ones are posted with them, their timers kept back (returned): they reach their start when sent again."""
    make_queue(h, settings=HOLD)
    h.receiver.answers = [500]
    start = h.clock.now
    line = (
        {"body": {"n": n}, "flow_key": "k", "deliver_at": format_rfc3339(start + timedelta(seconds=2 + n))}
        for n in range(LONG + 1)
    )
    # Posted apart, the late ones' timers are packed apart.
    messages = post(h, *line) + (post(h, *late) if late else [])
    kept = {m["id"] for m in messages[LONG + 1 :]}
    timers = h.timers()
    for timer in timers:
        if timer["json"]["id"] not in kept:
            h.sqs.send_message(QueueUrl=h.ctx.settings.timer_queue_url, MessageBody=timer["body"])
    advance(h, 2)
    step(h)
    advance(h, LONG + 1)
    step(h)
    return messages, [t["body"] for t in timers if t["json"]["id"] in kept]


def test_a_held_key_with_a_long_line_keeps_the_later_waiters_in_overflow_items(short_items: Harness) -> None:
    held_with_a_long_line(short_items)
    spilled = [sk for sk in order_items(short_items) if "#w#" in sk]
    assert (key(short_items, "k")["waiting"], len(spilled), delivered(short_items)) == (LONG, LONG - 4, [0])


def test_a_released_long_line_starts_one_at_a_time_in_due_order(short_items: Harness) -> None:
    held_with_a_long_line(short_items)
    status, _ = short_items.call("POST", "/v1/queues/orders/keys/k/release")
    step(short_items, rounds=3 * LONG)
    assert (status, delivered(short_items), order_items(short_items)) == (200, list(range(LONG + 1)), [])


def test_a_joiner_due_before_the_overflow_waiters_goes_before_them(short_items: Harness) -> None:
    """Due between the 2nd and 3rd waiters, its timer late: it goes inline, the last inline one to overflow."""
    due = format_rfc3339(short_items.clock.now + timedelta(seconds=4.5))
    _, late = held_with_a_long_line(short_items, {"body": {"n": 99}, "flow_key": "k", "deliver_at": due})
    for body in late:
        short_items.sqs.send_message(QueueUrl=short_items.ctx.settings.timer_queue_url, MessageBody=body)
    step(short_items)
    waiting = key(short_items, "k")["waiting"]
    spilled = [sk for sk in order_items(short_items) if "#w#" in sk]
    short_items.call("POST", "/v1/queues/orders/keys/k/release")
    step(short_items, rounds=3 * LONG)
    assert (waiting, len(spilled), delivered(short_items)) == (LONG + 1, LONG - 3, [0, 1, 2, 99, *range(3, LONG + 1)])


def test_a_cancelled_overflow_waiter_takes_its_item_with_it(short_items: Harness) -> None:
    messages, _ = held_with_a_long_line(short_items)
    last = messages[-1]["id"]
    status, _ = short_items.call("DELETE", f"/v1/queues/orders/messages/{last}")
    spilled = [sk for sk in order_items(short_items) if "#w#" in sk]
    assert (status, key(short_items, "k")["waiting"], any(last in sk for sk in spilled)) == (204, LONG - 1, False)


def test_removing_ordering_starts_the_overflow_waiters_too(short_items: Harness) -> None:
    held_with_a_long_line(short_items)
    make_queue(short_items, settings={k: v for k, v in HOLD.items() if k != "ordering"})
    step(short_items)
    assert (sorted(delivered(short_items)), order_items(short_items)) == (list(range(LONG + 1)), [])


def test_a_deleted_queue_leaves_no_overflow_item(short_items: Harness) -> None:
    held_with_a_long_line(short_items)
    status, _ = short_items.call("DELETE", "/v1/queues/orders")
    assert (status, order_items(short_items)) == (204, [])


def test_a_joiner_whose_key_write_loses_to_a_refill_keeps_its_place_in_overflow(
    short_items: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late joiner puts its overflow item; before its key write, three cancels leave one waiter inline and the
    last one refills the item from overflow: the joiner's write loses, it reads again and finds its item."""
    h = short_items
    due = format_rfc3339(h.clock.now + timedelta(seconds=2 + LONG + 0.5))
    messages, late = held_with_a_long_line(h, {"body": {"n": 99}, "flow_key": "k", "deliver_at": due})
    store = type(h.ctx.store)
    save, raced = store.save_key_order, []

    def racing(self: Any, queue: str, flow_key: str, state: Any, read: Any) -> bool:
        if not raced:
            raced.append(True)
            for message in messages[1:4]:
                h.call("DELETE", f"/v1/queues/orders/messages/{message['id']}")
        return bool(save(self, queue, flow_key, state, read))

    monkeypatch.setattr(store, "save_key_order", racing)
    for body in late:
        h.sqs.send_message(QueueUrl=h.ctx.settings.timer_queue_url, MessageBody=body)
    step(h)
    waiting = key(h, "k")["waiting"]
    h.call("POST", "/v1/queues/orders/keys/k/release")
    step(h, rounds=3 * LONG)
    assert (raced, waiting, delivered(h)) == ([True], LONG - 2, [0, *range(4, LONG + 1), 99])
    assert order_items(h) == []


def test_an_overflow_item_left_by_an_ended_message_wakes_nobody_wrongly(
    short_items: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel whose writer died before deleting the message's overflow item: the refill moves the ended
    message inline, and when the key reaches it, it is skipped (not pending) for the next one."""
    h = short_items
    messages, _ = held_with_a_long_line(h)
    store = type(h.ctx.store)
    with monkeypatch.context() as dying:
        dying.setattr(store, "unspill", lambda *args: None)
        status, _ = h.call("DELETE", f"/v1/queues/orders/messages/{messages[6]['id']}")
    left = [sk for sk in order_items(h) if messages[6]["id"] in sk]
    h.call("POST", "/v1/queues/orders/keys/k/release")
    step(h, rounds=3 * LONG)
    assert (status, len(left), delivered(h)) == (204, 1, [n for n in range(LONG + 1) if n != 6])
    assert order_items(h) == []


def test_a_waiter_in_overflow_shows_the_head_it_waits_behind(short_items: Harness) -> None:
    messages, _ = held_with_a_long_line(short_items)
    assert get(short_items, messages[-1]["id"])["blocked_by"] == messages[0]["id"]


def test_a_later_message_joins_its_line_while_the_woken_head_of_its_batch_is_still_in_its_attempt(
    harness: Harness,
) -> None:
    """Both timers in one batch: the head (as woken) leaves the process's arrival board when its turn is decided, so
    the later one does not wait for the head's attempt to end before it takes its place in line."""
    make_queue(harness, settings=ORDERED)
    head, later = post(
        harness, {"body": {"n": 1}, "flow_key": "k", "delay": 1}, {"body": {"n": 2}, "flow_key": "k", "delay": 1.001}
    )
    harness.ctx.store.save_key_order("orders", "k", core_ordering.KeyState(head=head["id"]), core_ordering.KeyState())
    timers = sorted(harness.timers(), key=lambda t: t["json"]["due"])
    harness.clock.now = max(harness.clock.now, from_ms(timers[-1]["json"]["due"]))
    seen: list[bool] = []

    def receiver(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> Any:
        deadline_s = time.monotonic() + 1.5  # real time: the later one's thread runs beside this one
        while harness.ctx.store.key_order("orders", "k").waiter(later["id"]) is None and time.monotonic() < deadline_s:
            time.sleep(0.01)
        seen.append(harness.ctx.store.key_order("orders", "k").waiter(later["id"]) is not None)
        return harness.receiver(url, body, headers, **kwargs)

    Dispatcher(replace(harness.ctx, post=receiver)).run_batch([(t["record"], t["body"]) for t in timers])
    assert (seen, delivered(harness)) == ([True], [1])
