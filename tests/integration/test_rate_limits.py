"""rate_limit and max_concurrency through the services on in-process AWS, with a fixed clock and
several concurrent sweepers and dispatchers sharing one table (docs/delivery-control.md)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from datetime import timedelta
from typing import Any

from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import read_timers
from hourglass.core.pacing import window_bound
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.timestamps import format_rfc3339, from_ms, parse_rfc3339, to_ms
from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.service.sweep import Sweeper

from tests.integration.conftest import Harness


class Recorder:
    """The HTTP target: records when each request started (fake clock) and how many were in flight."""

    def __init__(self, harness: Harness, hold: float = 0.0) -> None:
        self.clock = harness.clock
        self.hold = hold
        self.starts: list[tuple[int, Any]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def __call__(self, url: str, body: bytes, headers: dict[str, str], **_: Any) -> HttpReply:
        with self.lock:
            self.starts.append((to_ms(self.clock()), json.loads(body)))
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(self.hold)  # real time: the fake clock does not move, so no lease runs out meanwhile
        with self.lock:
            self.in_flight -= 1
        return HttpReply(status=200, headers={}, body=b"")


def make_queue(harness: Harness, name: str, **control: Any) -> None:
    status, doc = harness.call(
        "PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": "http://127.0.0.1:9/x"}, **control}
    )
    assert status == 201, doc


def post_burst(harness: Harness, name: str, count: int, due_ms: int, per_request: int = 100) -> dict[str, int]:
    """`count` messages due 1 ms apart from `due_ms`, body = their index; returns id -> due ms."""
    due: dict[str, int] = {}
    for first in range(0, count, per_request):
        indices = range(first, min(count, first + per_request))
        batch = [{"body": i, "deliver_at": format_rfc3339(from_ms(due_ms + i))} for i in indices]
        status, doc = harness.call("POST", f"/v1/queues/{name}/messages", {"messages": batch})
        assert status == 201, doc
        due.update({m["id"]: to_ms(parse_rfc3339(m["due_at"])) for m in doc["messages"]})
    return due


def over_bound(starts: list[int], rate: float) -> list[tuple[int, float, int]]:
    """Every window [start, start + W] for W in 1..10 s holding more starts than the contract allows."""
    ordered = sorted(starts)
    bad = []
    for i, first in enumerate(ordered):
        for window in range(1, 11):
            inside = sum(1 for t in ordered[i:] if t <= first + window * 1000)
            if inside > window_bound(rate, window):
                bad.append((first, window, inside))
    return bad


def drain(harness: Harness, rounds: int = 20) -> None:
    """Every timer on its own, in due order, as SQS makes it visible on the fake clock: one thread,
    so the clock moves exactly as one dispatcher's sleeps (a pack's threads would share its sleeps)."""
    for _ in range(rounds):
        timers = [timer for record in harness.timers() for timer in read_timers(record["body"])]
        if not timers:
            return
        for timer in sorted(timers, key=lambda t: t.due_ms):
            harness.clock.now = max(harness.clock.now, from_ms(timer.due_ms - TIMER_HEAD_START * 1000))
            Dispatcher(harness.ctx).run_batch([("r", timer.to_json())])


def test_a_burst_starts_within_the_bound_in_due_order_none_early_none_lost(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "paced", rate_limit=20)
    due_ms = to_ms(harness.clock() + timedelta(seconds=3))
    due = post_burst(harness, "paced", 100, due_ms)
    drain(harness)
    starts = [t for t, _ in recorder.starts]
    bodies = [b for _, b in recorder.starts]
    ids_by_index = {index: message_id for index, message_id in enumerate(sorted(due, key=due.__getitem__))}
    assert sorted(bodies) == list(range(100)) and len(bodies) == 100
    assert bodies == sorted(bodies)  # due order
    assert all(start >= due[ids_by_index[body]] for start, body in zip(starts, bodies, strict=True))
    assert over_bound(starts, 20) == []


def test_an_unlimited_queue_gets_plain_timers_and_no_limit_items(harness: Harness) -> None:
    make_queue(harness, "free")
    post_burst(harness, "free", 30, to_ms(harness.clock() + timedelta(seconds=3)))
    timers = harness.timers()
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    assert all("l" not in t["json"] and all(len(e) == 4 for e in t["json"].get("more", [])) for t in timers)
    assert [i["sk"]["S"] for i in items if i["sk"]["S"].startswith(("#pace", "#slot"))] == []


def test_concurrent_sweepers_hand_off_slots_of_one_pace(harness: Harness) -> None:
    make_queue(harness, "swept", rate_limit=10)
    due_ms = to_ms(harness.clock() + timedelta(seconds=1200))
    due = post_burst(harness, "swept", 60, due_ms)
    assert harness.timers() == []  # due beyond the lookahead: indexed, not handed off
    harness.clock.now = from_ms(due_ms + 200)
    contexts = [replace_context(harness) for _ in range(3)]
    threads = [threading.Thread(target=lambda c=c: Sweeper(c).run()) for c in contexts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    timers = [t for pack in harness.timers() for t in unpack(pack["json"])]
    slots = sorted(t["due"] for t in timers)
    assert sorted(t["id"] for t in timers) == sorted(due)  # each handed off once
    assert min(b - a for a, b in itertools.pairwise(slots)) >= 100  # 1/rate apart
    assert all(t["due"] >= due[t["id"]] for t in timers)


def test_concurrent_dispatchers_never_exceed_max_concurrency(harness: Harness) -> None:
    recorder = Recorder(harness, hold=0.2)
    harness.ctx.post = recorder
    make_queue(harness, "narrow", max_concurrency=3)
    post_burst(harness, "narrow", 24, to_ms(harness.clock() + timedelta(seconds=2)), per_request=8)
    for _ in range(30):
        timers = harness.timers()
        if not timers:
            break
        harness.clock.now = max(harness.clock.now, from_ms(max(t["json"]["due"] for t in timers)))
        dispatchers = [Dispatcher(replace_context(harness)) for _ in timers]
        threads = [
            threading.Thread(target=d.run_batch, args=([(t["record"], t["body"])],))
            for d, t in zip(dispatchers, timers, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert (recorder.peak, sorted(b for _, b in recorder.starts)) == (3, list(range(24)))


def test_a_refused_attempt_stays_pending_and_its_timer_comes_back(harness: Harness) -> None:
    harness.ctx.post = Recorder(harness)
    make_queue(harness, "one", max_concurrency=1)
    due = post_burst(harness, "one", 1, to_ms(harness.clock() + timedelta(seconds=2)))
    [message_id] = due
    queue = harness.ctx.store.get_queue("one", consistent=True)
    assert queue is not None
    until = to_ms(harness.clock() + timedelta(hours=1))
    harness.ctx.store.acquire_slot("one", 1, "someone#1", until, 0, 0, None, queue.slot_layout, to_ms(queue.created_at))
    harness.dispatch(harness.timers())
    [again] = harness.timers()
    _, doc = harness.call("GET", f"/v1/queues/one/messages/{message_id}")
    assert (doc["status"], doc["attempts"], again["json"].get("w")) == ("pending", 0, 1)


def slow_begins(harness: Harness, seconds: float, during: Any = None) -> Any:
    """Makes every begin write take `seconds` of the fake clock (a throttled write), running `during` in it."""
    store = harness.ctx.store
    begin = store.begin_delivery

    def slow_begin(*args: Any) -> Any:
        harness.clock.advance(seconds)
        if during is not None:
            during()
        return begin(*args)

    store.begin_delivery = slow_begin  # type: ignore[method-assign]
    return begin


def test_a_slot_missed_during_the_begin_write_waits_for_a_new_slot_in_the_dispatcher(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "slow", rate_limit=1)
    due = post_burst(harness, "slow", 1, to_ms(harness.clock() + timedelta(seconds=2)))
    [message_id] = due
    [timer] = harness.timers()
    slot_end = timer["json"]["l"]
    slow_begins(harness, 3)
    harness.dispatch([timer])
    stored = harness.ctx.store.get_message("slow", message_id)
    assert stored is not None
    # Started once, after the missed slot's window: begun (2), delivered (3), no put-back write, no timer re-sent.
    assert (stored.status.value, stored.attempts, stored.version, harness.timers()) == ("delivered", 1, 3, [])
    assert len(recorder.starts) == 1 and recorder.starts[0][0] > slot_end


def test_a_queue_paused_while_a_paced_attempt_begins_puts_it_back_unstarted(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    make_queue(harness, "slow", rate_limit=1)
    due = post_burst(harness, "slow", 1, to_ms(harness.clock() + timedelta(seconds=2)))
    [message_id] = due
    begin = slow_begins(harness, 0.5, lambda: harness.call("POST", "/v1/queues/slow/pause"))
    harness.dispatch(harness.timers())
    harness.ctx.store.begin_delivery = begin  # type: ignore[method-assign]
    [again] = harness.timers()
    _, doc = harness.call("GET", f"/v1/queues/slow/messages/{message_id}")
    assert (recorder.starts, doc["status"], doc["attempts"]) == ([], "pending", 0)
    assert again["json"]["due"] >= to_ms(harness.clock()) and again["json"]["v"] == 3  # begun (2), put back (3)
    harness.call("POST", "/v1/queues/slow/resume")
    harness.dispatch([again])
    assert len(recorder.starts) == 1


def replace_context(harness: Harness) -> Context:
    """Another process's context on the same table and queues (its own pacing cache)."""
    ctx = harness.ctx
    store = Store(ctx.settings.table, client=ctx.store.client)
    return Context(
        settings=ctx.settings,
        store=store,
        timers=ctx.timers,
        targets=ctx.targets,
        metrics=ctx.metrics,
        clock=ctx.clock,
        sleep=ctx.sleep,
        post=ctx.post,
        check_url=ctx.check_url,
    )


def unpack(doc: dict[str, Any]) -> list[dict[str, Any]]:
    first = {"id": doc["id"], "due": doc["due"], "l": doc.get("l")}
    return [first] + [{"id": e[1], "due": e[3], "l": e[4] if len(e) > 4 else None} for e in doc.get("more", [])]


def test_a_swept_slot_in_a_later_bucket_moves_the_index_entry_there(harness: Harness) -> None:
    make_queue(harness, "slow", rate_limit=0.1)  # slots 10.25 s apart
    width = harness.ctx.settings.bucket_seconds * 1000
    due_ms = (to_ms(harness.clock()) // width + 20) * width + 1_000  # early in a bucket, far ahead
    due = post_burst(harness, "slow", 12, due_ms)
    harness.clock.now = from_ms(due_ms + 100)
    Sweeper(harness.ctx).run()
    slots = {t["id"]: t["due"] for pack in harness.timers() for t in unpack(pack["json"])}
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    indexed = {i["sk"]["S"][2:]: int(i["sweep_sk"]["S"].partition("#")[0]) for i in items if "sweep_sk" in i}
    later = {i for i in due if slots[i] // width > due[i] // width}
    assert later and {i: indexed[i] for i in later} == {i: slots[i] for i in later}
    assert all(indexed[i] == due[i] for i in set(due) - later)


def test_a_retry_of_a_paced_queue_is_handed_off_with_a_slot(harness: Harness) -> None:
    make_queue(harness, "again", rate_limit=1, retry={"max_attempts": 3, "backoff_base": 1, "backoff_max": 1})
    [message_id] = post_burst(harness, "again", 1, to_ms(harness.clock() + timedelta(seconds=2)))
    harness.receiver.answers = [503]
    harness.dispatch(harness.timers())
    [retry] = harness.timers()
    _, doc = harness.call("GET", f"/v1/queues/again/messages/{message_id}")
    assert (doc["status"], doc["attempts"]) == ("pending", 1)
    slot_start, latest = retry["json"]["due"], retry["json"]["l"]
    assert latest - slot_start == 250 and slot_start >= to_ms(parse_rfc3339(doc["due_at"]))


def test_a_patched_message_of_a_paced_queue_is_handed_off_with_a_slot(harness: Harness) -> None:
    make_queue(harness, "edited", rate_limit=1)
    [message_id] = post_burst(harness, "edited", 1, to_ms(harness.clock() + timedelta(seconds=600)))
    status, doc = harness.call("PATCH", f"/v1/queues/edited/messages/{message_id}", {"delay": 5})
    [timer] = harness.timers()
    assert status == 200 and timer["json"]["due"] >= to_ms(parse_rfc3339(doc["due_at"])) and "l" in timer["json"]
