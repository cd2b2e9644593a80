"""One lifetime for a queue (in-process AWS, fixed clock): DELETE ends everything of a queue's life and a
queue created again under the same name starts clean; a settings write never undoes a pause."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hourglass.adapters.timer_queue import read_timers
from hourglass.core import handoff, keys
from hourglass.core.concurrency import holder
from hourglass.core.handoff import Timer
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.service import failure_notices
from hourglass.service.dispatch import Dispatcher
from hourglass.service.operations import Operations
from hourglass.service.queues import Queues

from tests.integration.conftest import Harness
from tests.integration.test_rate_limits import Recorder, drain, make_queue, post_burst
from tests.integration.test_schedules import run_until

TARGET = {"type": "http", "url": "http://127.0.0.1:9/x"}
# Items that go with their message (or carry its queue's epoch), not with the queue.
MESSAGE_SCOPED = (keys.MESSAGE_PREFIX, keys.HISTORY_PREFIX, keys.DEDUP_PREFIX, keys.BODY_PREFIX)


def recreate(h: Harness, name: str, **settings: Any) -> None:
    assert h.call("DELETE", f"/v1/queues/{name}")[0] == 204
    status, doc = h.call("PUT", f"/v1/queues/{name}", {"target": TARGET, **settings})
    assert status == 201, doc


def post_one(h: Harness, name: str, **fields: Any) -> str:
    status, doc = h.call("POST", f"/v1/queues/{name}/messages", {"messages": [{"body": "new", **fields}]})
    assert status == 201, doc
    return str(doc["messages"][0]["id"])


def status_of(h: Harness, name: str, message_id: str) -> str:
    status, doc = h.call("GET", f"/v1/queues/{name}/messages/{message_id}")
    assert status == 200, doc
    return str(doc["status"])


def visible_at(timer: Timer) -> int:
    """When SQS makes a timer visible: its send time plus the DelaySeconds it was sent with."""
    return timer.sent_ms + 1000 * handoff.delay_of(timer, from_ms(timer.sent_ms))


def run_as_sqs(h: Harness, rounds: int = 50) -> None:
    """Every timer handed to a dispatcher when SQS would make it visible (not at its due time)."""
    for _ in range(rounds):
        timers = [timer for record in h.timers() for timer in read_timers(record["body"])]
        if not timers:
            return
        for timer in sorted(timers, key=visible_at):
            h.clock.now = max(h.clock.now, from_ms(visible_at(timer)))
            Dispatcher(h.ctx).run_batch([("r", timer.to_json())])


# DELETE ---------------------------------------------------------------------------------------
def items_of(h: Harness, name: str) -> list[dict[str, Any]]:
    """Every item in the queue's partition, and every entry elsewhere in the table that names the queue."""
    items: list[dict[str, Any]] = []
    for page in h.ddb.get_paginator("scan").paginate(TableName=h.ctx.settings.table):
        items += [item for item in page["Items"] if name in (item["pk"]["S"], item["sk"]["S"].split("/")[0])]
    return items


def test_delete_leaves_nothing_the_queue_owned_but_its_ended_messages(harness: Harness) -> None:
    harness.ctx.invoke_fanout = lambda event: None  # the operation stays running, with its running entry
    make_queue(harness, "orders", rate_limit=5, max_concurrency=2, flow_control={"key_rate_limit": 2})
    assert harness.call("PUT", "/v1/queues/orders/schedules/tick", {"every": 60, "body": 1})[0] == 201
    post_one(harness, "orders", flow_key="a", dedup_id="once")
    post_one(harness, "orders", flow_key="b", priority=9)
    drain(harness, rounds=3)  # delivered: counters, history, a concurrency slot released
    waiting = [post_one(harness, "orders", flow_key="a", delay=600) for _ in range(3)]
    assert harness.call("POST", "/v1/queues/orders/operations", {"action": "cancel"})[0] == 202

    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204

    left = items_of(harness, "orders")
    in_partition = [item["sk"]["S"] for item in left if item["pk"]["S"] == "orders"]
    assert [sk for sk in in_partition if not sk.startswith(MESSAGE_SCOPED)] == [keys.ENDED_SK]
    assert [item for item in left if item["pk"]["S"] != "orders"] == []  # its list and running-operation entries
    messages = harness.ctx.store.list_messages("orders", status=None, limit=100, cursor=None)[0]
    assert {m.id: m.status.value for m in messages if m.id in waiting} == dict.fromkeys(waiting, "cancelled")
    assert all(m.status.finished for m in messages)


# pacing ---------------------------------------------------------------------------------------
def test_a_queue_created_again_paces_from_now_not_from_the_deleted_queues_cursor(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "paced", rate_limit=1)
    post_burst(harness, "paced", 300, to_ms(harness.clock()))  # slots up to ~375 s ahead
    recreate(harness, "paced", rate_limit=100)
    posted = to_ms(harness.clock())
    post_one(harness, "paced")
    drain(harness)
    [start] = [t for t, body in recorder.starts if body == "new"]
    assert start - posted < 3000


def test_removing_the_rate_limit_releases_a_backlog_already_paced(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "paced", rate_limit=1)
    post_burst(harness, "paced", 400, to_ms(harness.clock()))  # slots up to ~500 s ahead
    changed = to_ms(harness.clock())
    assert harness.call("PUT", "/v1/queues/paced", {"target": TARGET})[0] == 200
    run_as_sqs(harness)
    starts = [t for t, _ in recorder.starts]
    assert len(starts) == 400
    assert max(starts) - changed <= harness.ctx.settings.lookahead * 1000


def test_a_rate_limit_set_again_after_removal_paces_from_now(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "paced", rate_limit=1)
    post_burst(harness, "paced", 300, to_ms(harness.clock()))
    assert harness.call("PUT", "/v1/queues/paced", {"target": TARGET})[0] == 200
    assert harness.call("PUT", "/v1/queues/paced", {"target": TARGET, "rate_limit": 100})[0] == 200
    posted = to_ms(harness.clock())
    post_one(harness, "paced")
    drain(harness)
    [start] = [t for t, body in recorder.starts if body == "new"]
    assert start - posted < 3000


# schedules ------------------------------------------------------------------------------------
def test_a_deleted_queues_schedules_are_not_listed_for_the_queue_created_again(harness: Harness) -> None:
    make_queue(harness, "orders")
    assert harness.call("PUT", "/v1/queues/orders/schedules/tick", {"every": 60, "body": 1})[0] == 201
    recreate(harness, "orders")
    status, doc = harness.call("GET", "/v1/queues/orders/schedules")
    assert (status, doc["schedules"]) == (200, [])
    assert harness.call("GET", "/v1/queues/orders/schedules/tick")[0] == 404


def test_a_schedule_of_the_same_name_on_a_queue_created_again_fires(harness: Harness) -> None:
    make_queue(harness, "orders")
    rule = {"cron": "0 * * * *", "body": "tick"}
    assert harness.call("PUT", "/v1/queues/orders/schedules/hourly", rule)[0] == 201
    harness.clock.advance(1)
    recreate(harness, "orders")
    assert harness.call("PUT", "/v1/queues/orders/schedules/hourly", rule)[0] == 201
    run_until(harness, harness.clock.now + timedelta(minutes=61))
    assert [r["body"] for r in harness.receiver.requests] == ["tick"]


def test_a_schedule_left_by_a_delete_that_died_half_way_is_gone_when_the_queue_is_created_again(
    harness: Harness,
) -> None:
    make_queue(harness, "orders")
    assert harness.call("PUT", "/v1/queues/orders/schedules/tick", {"every": 60, "body": 1})[0] == 201
    harness.ctx.store.delete_queue("orders")  # DELETE died after its first write
    assert harness.call("PUT", "/v1/queues/orders", {"target": TARGET})[0] == 201
    assert harness.call("GET", "/v1/queues/orders/schedules")[1]["schedules"] == []
    run_until(harness, harness.clock.now + timedelta(minutes=3))
    assert harness.receiver.requests == []


# dedup, operations, concurrency slots ---------------------------------------------------------
def test_a_dedup_id_of_the_deleted_queue_does_not_dedupe_on_the_queue_created_again(harness: Harness) -> None:
    make_queue(harness, "orders")
    first = post_one(harness, "orders", dedup_id="once", delay=600)
    recreate(harness, "orders")  # at the same instant: the fixed clock does not move
    second = post_one(harness, "orders", dedup_id="once", delay=600)
    assert second != first
    assert status_of(harness, "orders", second) == "pending"


def test_an_operation_of_the_deleted_queue_never_acts_on_the_queue_created_again(harness: Harness) -> None:
    harness.ctx.invoke_fanout = lambda event: None  # its workers never start: a restart is left to the sweeper
    make_queue(harness, "orders")
    status, started = harness.call("POST", "/v1/queues/orders/operations", {"action": "cancel"})
    assert status == 202, started
    recreate(harness, "orders")
    fresh = post_one(harness, "orders", delay=3600)
    harness.clock.advance(600)
    harness.ctx.invoke_fanout = None  # restarted workers run in this process
    Operations(harness.ctx).restart_stale()
    assert status_of(harness, "orders", fresh) == "pending"
    assert harness.call("GET", f"/v1/queues/orders/operations/{started['id']}")[0] == 404


def test_a_concurrency_slot_held_on_the_deleted_queue_does_not_block_the_queue_created_again(
    harness: Harness,
) -> None:
    make_queue(harness, "orders", max_concurrency=1)
    until = to_ms(harness.clock() + timedelta(minutes=5))
    # An attempt of the old queue took the only slot (where that queue keeps its slots) and died holding it.
    old = harness.ctx.store.get_queue("orders", consistent=True)
    assert old is not None
    now_ms = to_ms(harness.clock())
    home = (old.slot_layout, to_ms(old.created_at))
    assert harness.ctx.store.acquire_slot("orders", 1, holder("old", 1), until, now_ms, 0, None, *home)
    recreate(harness, "orders", max_concurrency=1)
    fresh = post_one(harness, "orders")
    drain(harness, rounds=3)
    assert status_of(harness, "orders", fresh) == "delivered"


# rule 5: conditional queue writes -------------------------------------------------------------
class ReadBefore:
    """The store as a PUT sees it when its read of the queue was answered before a pause committed."""

    def __init__(self, store: Any, stale: Any) -> None:
        self._store = store
        self._stale = [stale]

    def get_queue(self, name: str, **kwargs: Any) -> Any:
        return self._stale.pop() if self._stale else self._store.get_queue(name, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_pause_answered_during_a_settings_put_is_not_undone(harness: Harness) -> None:
    make_queue(harness, "orders")
    before = harness.ctx.store.get_queue("orders", consistent=True)
    assert harness.call("POST", "/v1/queues/orders/pause")[0] == 200
    racing = Queues(replace(harness.ctx, store=ReadBefore(harness.ctx.store, before)))  # type: ignore[arg-type]
    queue, _ = racing.put("orders", {"target": TARGET, "timeout": 30})
    status, doc = harness.call("GET", "/v1/queues/orders")
    assert (status, doc["paused"], doc["timeout"], queue.control and queue.control.paused) == (200, True, 30, True)


def test_a_failure_notice_of_the_deleted_queue_goes_to_no_destination_of_the_queue_created_again(
    harness: Harness,
) -> None:
    notices = {"url": "http://127.0.0.1:9/notices"}
    settings = {"target": TARGET, "retry": {"max_attempts": 1}, "failure_destination": {"type": "http", **notices}}
    assert harness.call("PUT", "/v1/queues/orders", settings)[0] == 201
    harness.receiver.answers = [400, 503]  # the message fails; sending its notice fails: it stays in the outbox
    post_one(harness, "orders")
    harness.dispatch(harness.timers())
    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204
    assert harness.call("PUT", "/v1/queues/orders", settings)[0] == 201
    harness.clock.advance(120)
    failure_notices.recover(harness.ctx)
    assert [r["url"] for r in harness.receiver.requests] == [TARGET["url"], notices["url"]]
