"""A PUT that changes a queue's limits mid-backlog (issue 26): the queue bound holds across a key rate added or
removed and across a change of the windows' width, removing the rate limit ends the queue's windows, and a key's
attempts paced before its key rate was added take key concurrency slots."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hourglass.adapters.timer_queue import read_timers
from hourglass.core.handoff import Scheduled
from hourglass.core.keys import queue_of_pk
from hourglass.core.model import Status
from hourglass.core.timestamps import to_ms
from hourglass.service.pacing import Pacer

from tests.integration import test_rate_limits as limits
from tests.integration.conftest import Harness
from tests.integration.test_flow_keys import post_keyed


def put_queue(harness: Harness, name: str, **control: Any) -> None:
    status, doc = harness.call(
        "PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": "http://127.0.0.1:9/x"}, **control}
    )
    assert status in (200, 201), doc


def backlog_then_switch(harness: Harness, before: dict[str, Any], after: dict[str, Any]) -> list[int]:
    """10 messages due at once handed off under `before` (5 s of slots at rate 2), the PUT to `after`, 10 more
    of other keys due at once handed off by another process (its own pacing cache), all drained: every start."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    put_queue(harness, "switched", **before)
    due_ms = to_ms(harness.clock() + timedelta(seconds=3))
    post_keyed(harness, "switched", [("a", 5), ("b", 5)] * 5, due_ms)
    put_queue(harness, "switched", **after)
    harness.ctx.pacer = Pacer(harness.ctx.store)
    post_keyed(harness, "switched", [("c", 5), ("d", 5)] * 5, due_ms)
    limits.drain(harness, rounds=60)
    return [at for at, _ in recorder.starts]


def test_the_queue_bound_holds_when_a_key_rate_moves_its_slots_to_windows_mid_backlog(harness: Harness) -> None:
    starts = backlog_then_switch(harness, {"rate_limit": 2}, {"rate_limit": 2, "flow_control": {"key_rate_limit": 5}})
    assert (len(starts), limits.over_bound(starts, 2)) == (20, [])


def test_the_queue_bound_holds_when_removing_the_key_rate_moves_its_slots_to_one_cursor(harness: Harness) -> None:
    starts = backlog_then_switch(harness, {"rate_limit": 2, "flow_control": {"key_rate_limit": 5}}, {"rate_limit": 2})
    assert (len(starts), limits.over_bound(starts, 2)) == (20, [])


def test_the_queue_bound_holds_when_a_new_rate_gives_its_windows_another_width(harness: Harness) -> None:
    """Rate 1 keeps windows of 2.5 s, rate 2 of 1 s: the new windows start after the old ones' last slot."""
    flow = {"flow_control": {"key_rate_limit": 5}}
    starts = backlog_then_switch(harness, {"rate_limit": 1, **flow}, {"rate_limit": 2, **flow})
    assert (len(starts), limits.over_bound(starts, 2)) == (20, [])


def pace_items(harness: Harness, queue: str) -> list[str]:
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    return sorted(i["sk"]["S"] for i in items if i["pk"]["S"] == queue and i["sk"]["S"].startswith("#pace"))


def test_removing_the_rate_limit_ends_the_queues_windows_and_keeps_the_keys(harness: Harness) -> None:
    put_queue(harness, "windowed", rate_limit=2, flow_control={"key_rate_limit": 5})
    post_keyed(harness, "windowed", [("a", 5)] * 6, to_ms(harness.clock() + timedelta(seconds=3)))
    assert any(sk.startswith("#pace#w#") for sk in pace_items(harness, "windowed"))
    put_queue(harness, "windowed", flow_control={"key_rate_limit": 5})
    left = pace_items(harness, "windowed")
    assert left and all(sk.startswith("#pace#k#1:a#w#") for sk in left)


def test_a_rate_limit_added_back_starts_from_now_not_behind_the_old_windows(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    put_queue(harness, "again", rate_limit=1, flow_control={"key_rate_limit": 5})
    post_keyed(harness, "again", [("a", 5), ("b", 5)] * 3, to_ms(harness.clock() + timedelta(seconds=60)))
    put_queue(harness, "again")
    put_queue(harness, "again", rate_limit=1, flow_control={"key_rate_limit": 5})
    due_ms = to_ms(harness.clock() + timedelta(seconds=3))
    post_keyed(harness, "again", [("c", 5)], due_ms)
    limits.drain(harness, rounds=60)
    [first] = [at for at, body in recorder.starts if body["k"] == "c"]
    assert due_ms <= first <= due_ms + 1000


def key_slot_items(harness: Harness, queue: str) -> list[str]:
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    # Wherever the queue keeps its slots (`keys.slot_pk`: a queue created now, in partitions of their own).
    return [i["sk"]["S"] for i in items if queue_of_pk(i["pk"]["S"]) == queue and i["sk"]["S"].startswith("#slot#k#")]


def test_an_attempt_paced_before_its_key_rate_was_added_takes_a_key_concurrency_slot(harness: Harness) -> None:
    """key_rate_limit 1 cannot reach key_max_concurrency 100 within a lease, but the 3 attempts of key "a" were
    paced by the queue's rate 10 alone, with no key slot: they count in the key's concurrency."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    put_queue(harness, "late", rate_limit=10, flow_control={"key_max_concurrency": 100})
    post_keyed(harness, "late", [("a", 5)] * 3, to_ms(harness.clock() + timedelta(seconds=3)))
    put_queue(harness, "late", rate_limit=10, flow_control={"key_rate_limit": 1, "key_max_concurrency": 100})
    limits.drain(harness)
    assert (len(recorder.starts), {sk.split("#")[3] for sk in key_slot_items(harness, "late")}) == (3, {"a"})


def test_once_those_attempts_are_past_their_leases_the_key_rate_alone_keeps_the_limit(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    put_queue(harness, "late", rate_limit=10, flow_control={"key_max_concurrency": 100})
    post_keyed(harness, "late", [("a", 5)], to_ms(harness.clock() + timedelta(seconds=3)))
    put_queue(harness, "late", rate_limit=10, flow_control={"key_rate_limit": 1, "key_max_concurrency": 100})
    limits.drain(harness)
    harness.clock.now += timedelta(minutes=10)
    post_keyed(harness, "late", [("b", 5)] * 2, to_ms(harness.clock() + timedelta(seconds=3)))
    limits.drain(harness)
    assert (len(recorder.starts), {sk.split("#")[3] for sk in key_slot_items(harness, "late")}) == (3, {"a"})


def test_a_rate_limit_added_to_a_key_paced_queue_counts_the_timers_already_out(harness: Harness) -> None:
    """Keys "a" and "b" at 5/s each were paced by their key rates alone (1 s of slots for 10 messages): the PUT
    adding a queue rate 2 gives them new slots counted in the queue's scope, with keys "c" and "d" of another
    process, so every window of 1-10 s across the switch keeps 2·W + 2 and nothing is lost or early."""
    flow = {"flow_control": {"key_rate_limit": 5}}
    starts = backlog_then_switch(harness, flow, {"rate_limit": 2, **flow})
    assert (len(starts), limits.over_bound(starts, 2)) == (20, [])


def handed_off_slots(harness: Harness) -> dict[int, tuple[int, int]]:
    """The slot each message's timer waits for now, by the message's body index (the timers are sent back)."""
    slots = {}
    timers = [timer for record in harness.timers() for timer in read_timers(record["body"])]
    for timer in timers:
        message = harness.ctx.store.get_message(timer.queue, timer.id)
        assert message is not None and timer.latest_ms is not None
        slots[message.body["i"]] = (timer.due_ms, timer.latest_ms)
    harness.ctx.handoff.resend([Scheduled(timer, 0) for timer in timers])
    return slots


def test_removing_the_key_rate_and_adding_it_back_keeps_every_timer_in_its_slot(harness: Harness) -> None:
    """The backlog's slots were counted in the queue's scope: neither PUT gives them new ones, each starts in
    the slot it was handed off with."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    put_queue(harness, "kept", rate_limit=2, flow_control={"key_rate_limit": 5})
    post_keyed(harness, "kept", [("a", 5), ("b", 5)] * 3, to_ms(harness.clock() + timedelta(seconds=3)))
    slots = handed_off_slots(harness)
    put_queue(harness, "kept", rate_limit=2)
    put_queue(harness, "kept", rate_limit=2, flow_control={"key_rate_limit": 5})
    limits.drain(harness)
    started = {body["i"]: at for at, body in recorder.starts}
    assert (len(recorder.starts), [i for i, at in started.items() if not slots[i][0] <= at <= slots[i][1]]) == (6, [])


# A begin write this slow misses its slot: the begun attempt waits for a new one, past the age of the gate's read.
SLOW_BEGIN_S = 1.5


def test_an_attempt_begun_before_a_queue_rate_was_added_takes_a_new_slot_before_it_starts(harness: Harness) -> None:
    """The PUT lands while a begun attempt waits for a key-only slot (its begin was slow, so it took a new one): its
    read of the queue before the start sees the queue rate, so it is put back and starts once, in a slot the queue's
    scope counts (its window's pacing item)."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    flow = {"flow_control": {"key_rate_limit": 1}}
    put_queue(harness, "begun", **flow)
    post_keyed(harness, "begun", [("a", 5)], to_ms(harness.clock() + timedelta(seconds=3)))
    [message], _ = harness.ctx.store.list_messages("begun", status=None, limit=10, cursor=None)
    switched: list[bool] = []

    def sleep(seconds: float) -> None:
        current = harness.ctx.store.get_message("begun", message.id)
        if not switched and current is not None and current.status is Status.DELIVERING:
            switched.append(True)
            put_queue(harness, "begun", rate_limit=1, **flow)
            harness.clock.sleep(SLOW_BEGIN_S)
        harness.clock.sleep(seconds)

    harness.ctx.sleep = sleep
    limits.drain(harness)
    counted = [sk for sk in pace_items(harness, "begun") if sk.startswith("#pace#w#")]
    assert (switched, len(recorder.starts), len(counted)) == ([True], 1, 1)
