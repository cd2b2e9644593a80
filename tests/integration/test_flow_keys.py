"""Flow control per key and priority (contract v1.2): the fields on every path that creates a message, their
validation, the queue's `flow_control`, and the limits kept per key beside the queue-wide ones."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

from hourglass import contract
from hourglass.core.pacing import Item, PaceState, Window
from hourglass.core.timestamps import format_rfc3339, from_ms, to_ms
from hourglass.service.dispatch import Dispatcher

from tests.integration import test_rate_limits as limits
from tests.integration.conftest import Harness
from tests.integration.test_delivery_control import run_until_quiet
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.integration.test_schedules import occurrences, put

FLOW = {**HTTP_QUEUE, "flow_control": {"key_rate_limit": 2, "key_max_concurrency": 1}}


def error_field(doc: Any) -> str:
    return str(doc["error"]["message"]).split(":")[0]


# fields and validation -----------------------------------------------------------------------
def test_a_message_keeps_its_flow_key_and_priority(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "flow_key": "tenant-a", "priority": 9})
    doc = get(harness, created["id"])
    assert (doc["flow_key"], doc["priority"]) == ("tenant-a", 9)


def test_a_message_without_them_has_no_key_and_priority_5(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1})
    doc = get(harness, created["id"])
    assert (doc["flow_key"], doc["priority"]) == (None, 5)


def test_a_priority_out_of_range_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call(
        "POST", "/v1/queues/orders/messages", {"messages": [{"body": 1}, {"body": 2, "priority": 10}]}
    )
    assert (status, error_field(doc)) == (400, "messages[1].priority")


def test_a_flow_key_too_long_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "flow_key": "k" * 129}]})
    assert (status, error_field(doc)) == (400, "messages[0].flow_key")


def test_an_empty_flow_key_is_a_400(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "flow_key": ""}]})
    assert (status, error_field(doc)) == (400, "messages[0].flow_key")


def test_a_redelivered_message_keeps_its_flow_key_and_priority(harness: Harness) -> None:
    make_queue(harness, settings=FLOW)
    harness.receiver.answers = [500, 500, 500, 200]
    [created] = post(harness, {"body": 1, "flow_key": "t", "priority": 2})
    run_until_quiet(harness)
    status, doc = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/redeliver")
    assert (status, doc["status"], doc["flow_key"], doc["priority"]) == (200, "pending", "t", 2)


def test_the_list_filters_by_flow_key(harness: Harness) -> None:
    make_queue(harness)
    created = post(harness, {"body": 1, "flow_key": "a"}, {"body": 2, "flow_key": "b"}, {"body": 3})
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"flow_key": "a"})
    assert (status, [m["id"] for m in doc["messages"]]) == (200, [created[0]["id"]])


def test_the_list_in_due_order_filters_by_flow_key(harness: Harness) -> None:
    make_queue(harness)
    late, _other, early = post(
        harness,
        {"body": 1, "flow_key": "a", "delay": 600},
        {"body": 2, "flow_key": "b", "delay": 60},
        {"body": 3, "flow_key": "a", "delay": 120},
    )
    params = {"flow_key": "a", "order": "due"}
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params=params)
    assert (status, [m["id"] for m in doc["messages"]]) == (200, [early["id"], late["id"]])


def test_a_schedule_gives_its_key_and_priority_to_its_occurrences(harness: Harness) -> None:
    make_queue(harness)
    status, doc = put(harness, "daily", {"every": 3600, "body": 1, "flow_key": "t", "priority": 7})
    assert (status in (200, 201), doc["flow_key"], doc["priority"]) == (True, "t", 7)
    [occurrence] = occurrences(harness, "daily")
    assert (occurrence["flow_key"], occurrence["priority"]) == ("t", 7)


def test_a_schedule_with_a_bad_priority_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = put(harness, "daily", {"every": 3600, "body": 1, "priority": -1})
    assert (status, error_field(doc)) == (400, "priority")


def test_the_queue_shows_its_flow_control(harness: Harness) -> None:
    make_queue(harness, settings=FLOW)
    status, doc = harness.call("GET", "/v1/queues/orders")
    assert (status, doc["flow_control"]) == (200, {"key_rate_limit": 2.0, "key_max_concurrency": 1})


def test_a_flow_control_out_of_range_is_a_400_naming_it(harness: Harness) -> None:
    status, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "flow_control": {"key_max_concurrency": 0}})
    assert (status, error_field(doc)) == (400, "flow_control.key_max_concurrency")


# key limits through the services (fake clock) ------------------------------------------------
def post_keyed(h: Harness, name: str, keys_and_priorities: list[tuple[str | None, int]], due_ms: int) -> None:
    batch = [
        {"body": {"i": i, "k": key, "p": priority}, "deliver_at": format_rfc3339(from_ms(due_ms)), "priority": priority}
        | ({"flow_key": key} if key is not None else {})
        for i, (key, priority) in enumerate(keys_and_priorities)
    ]
    status, doc = h.call("POST", f"/v1/queues/{name}/messages", {"messages": batch})
    assert status == 201, doc


def starts_by_key(recorder: limits.Recorder) -> dict[str | None, list[int]]:
    out: dict[str | None, list[int]] = {}
    for at, body in recorder.starts:
        out.setdefault(body["k"], []).append(at)
    return out


def test_two_keys_each_keep_their_rate_and_finish_together(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "keyed", flow_control={"key_rate_limit": 2})
    post_keyed(harness, "keyed", [("a", 5)] * 20 + [("b", 5)] * 20, to_ms(harness.clock() + timedelta(seconds=3)))
    limits.drain(harness)
    by_key = starts_by_key(recorder)
    assert (len(by_key["a"]), len(by_key["b"])) == (20, 20)
    assert (limits.over_bound(by_key["a"], 2), limits.over_bound(by_key["b"], 2)) == ([], [])
    assert abs(max(by_key["a"]) - max(by_key["b"])) <= 1000


def test_the_queue_rate_and_the_key_rate_both_hold(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "both", rate_limit=3, flow_control={"key_rate_limit": 2})
    post_keyed(harness, "both", [("a", 5), ("b", 5), (None, 5)] * 10, to_ms(harness.clock() + timedelta(seconds=3)))
    limits.drain(harness, rounds=40)
    every = [at for at, _ in recorder.starts]
    assert len(every) == 30 and limits.over_bound(every, 3) == []
    assert all(limits.over_bound(starts, 2) == [] for starts in starts_by_key(recorder).values())


def test_a_saturated_key_does_not_hold_back_another_key_under_a_queue_rate(harness: Harness) -> None:
    """Key "n" posts 40 due at once (20 s of its key_rate_limit 2); key "q"'s messages, posted after them
    and due a second apart, start within 1 s of their due times, and both bounds hold."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "shared", rate_limit=10, flow_control={"key_rate_limit": 2})
    due_ms = to_ms(harness.clock() + timedelta(seconds=3))
    post_keyed(harness, "shared", [("n", 5)] * 40, due_ms)
    for second in range(5):
        post_keyed(harness, "shared", [("q", 5)], due_ms + 1000 * second)
    limits.drain(harness, rounds=60)
    by_key = starts_by_key(recorder)
    late = [at - (due_ms + 1000 * i) for i, at in enumerate(sorted(by_key["q"]))]
    assert len(by_key["n"]) == 40 and len(late) == 5 and all(0 <= ms <= 1000 for ms in late), late
    every = [at for at, _ in recorder.starts]
    assert (limits.over_bound(every, 10), limits.over_bound(by_key["n"], 2)) == ([], [])


def test_the_windows_of_a_queue_are_read_back_in_one_range(harness: Harness) -> None:
    """Windows 9, 10 and 11 of width 1 s written (the zero-padded index keeps 9 before 10); windows 10-12 hold
    10 and 11's slots, and other widths, keys or queues' windows are not among them."""
    store = harness.ctx.store
    for index in (9, 10, 11):
        store.advance_pace("shared", Item(None, Window(1_000_000, index)), PaceState(), (index,), None)
    store.advance_pace("shared", Item(None, Window(2_000_000, 10)), PaceState(), (7,), None)
    store.advance_pace("shared", Item("a", Window(1_000_000, 10)), PaceState(), (7,), None)
    store.advance_pace("other", Item(None, Window(1_000_000, 10)), PaceState(), (7,), None)
    held = store.pace_windows("shared", None, 1_000_000, 10, 3)
    assert held == {10: PaceState((10,)), 11: PaceState((11,))}


def test_held_back_messages_start_by_priority(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "ranked", rate_limit=1)
    due_ms = to_ms(harness.clock() + timedelta(seconds=3))
    post_keyed(harness, "ranked", [(None, 1)] * 4 + [(None, 9)] * 2, due_ms)
    limits.drain(harness)
    assert [body["p"] for _, body in recorder.starts] == [9, 9, 1, 1, 1, 1]


def post_low_then_high(h: Harness, name: str, key: str | None, high_via: Harness | None = None) -> None:
    """10 low-priority messages due now in one request, then 3 high-priority ones in the next (through the
    process `high_via`, if given)."""
    now_ms = to_ms(h.clock())
    post_keyed(h, name, [(key, 1)] * 10, now_ms)
    post_keyed(high_via or h, name, [(key, 9)] * 3, now_ms)


def test_high_priority_handed_off_after_a_backlog_starts_before_its_far_slots(harness: Harness) -> None:
    """Rate 1 (slots 1.25 s apart from 1 s ahead): the low ones' first three slots are nearer than the margin
    (4 s) and keep them; the three high ones, posted next, take the following three and start next."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "ranked", rate_limit=1)
    post_low_then_high(harness, "ranked", None)
    limits.drain(harness)
    assert [body["p"] for _, body in recorder.starts] == [1] * 3 + [9] * 3 + [1] * 7
    assert limits.over_bound([at for at, _ in recorder.starts], 1) == []


def test_high_priority_of_a_key_handed_off_after_its_backlog_starts_next(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "keyed", flow_control={"key_rate_limit": 1})
    post_low_then_high(harness, "keyed", "t")
    limits.drain(harness)
    assert [body["p"] for _, body in recorder.starts] == [1] * 3 + [9] * 3 + [1] * 7
    assert limits.over_bound([at for at, _ in recorder.starts], 1) == []


def test_a_cancelled_message_does_not_give_way_and_the_next_one_does(harness: Harness) -> None:
    """Rate 1: low 3 holds the first slot beyond the margin but is cancelled; the high one posted next takes
    low 4's slot instead (the cancelled one's write loses), low 4 goes last, and the cancelled one never starts."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "ranked", rate_limit=1)
    now_ms = to_ms(harness.clock())
    post_keyed(harness, "ranked", [(None, 1)] * 10, now_ms)
    by_index = {m["body"]["i"]: m["id"] for m in list_all(harness, "ranked")}
    status, _ = harness.call("DELETE", f"/v1/queues/ranked/messages/{by_index[3]}")
    assert status in (200, 204)
    post_keyed(harness, "ranked", [(None, 9)], now_ms)
    limits.drain(harness)
    assert [(body["p"], body["i"]) for _, body in recorder.starts] == [
        *((1, i) for i in (0, 1, 2)),
        (9, 0),
        *((1, i) for i in (5, 6, 7, 8, 9, 4)),
    ]


def test_high_priority_handed_off_by_the_sweep_takes_a_backlogs_slot(harness: Harness) -> None:
    """Rate 0.1 (slots 10.25 s apart from 1 s ahead): 40 low posted due now hold slots up to ~400 s ahead; 3 high
    due just beyond ingest's hand-off window are handed off by a sweep 31 s later (the low ones due by then
    start meanwhile) and take the slots of the first 3 low ones at or after their due time."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "swept", rate_limit=0.1)
    timing, now_ms = harness.ctx.settings.timing, to_ms(harness.clock())
    due_high = now_ms + int((timing.sweep_ahead + timing.safety + 1) * 1000)
    post_keyed(harness, "swept", [(None, 1)] * 40, now_ms)
    post_keyed(harness, "swept", [(None, 9)] * 3, due_high)
    sweep_at = now_ms + int((timing.safety + 1.2) * 1000)
    timers = harness.timers()
    harness.dispatch([t for t in timers if t["json"]["due"] < sweep_at])
    for later in (t for t in timers if t["json"]["due"] >= sweep_at):
        harness.sqs.send_message(QueueUrl=harness.ctx.settings.timer_queue_url, MessageBody=later["body"])
    harness.clock.now = from_ms(sweep_at)
    harness.sweep()
    limits.drain(harness, rounds=60)
    ahead = -(-(due_high - now_ms - 1000) // 10_250)  # the low ones whose slots are before the high ones' due
    assert [body["p"] for _, body in recorder.starts] == [1] * ahead + [9] * 3 + [1] * (40 - ahead)


def test_messages_of_one_priority_handed_off_later_rewrite_no_earlier_one(harness: Harness) -> None:
    """Without priorities that differ nothing gives way: every message keeps its first version and they start
    in the order posted."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "plain", rate_limit=1)
    now_ms = to_ms(harness.clock())
    post_keyed(harness, "plain", [(None, 5)] * 10, now_ms)
    post_keyed(harness, "plain", [(None, 5)] * 3, now_ms)
    versions = [harness.ctx.store.get_message("plain", m["id"]).version for m in list_all(harness, "plain")]
    limits.drain(harness)
    assert (versions, [body["i"] for _, body in recorder.starts]) == ([1] * 13, [*range(10), *range(3)])


def list_all(h: Harness, name: str) -> list[Any]:
    status, doc = h.call("GET", f"/v1/queues/{name}/messages", params={"limit": "100"})
    assert status == 200, doc
    return list(doc["messages"])


def test_a_key_limited_queue_writes_pacing_items_per_key_with_a_ttl(harness: Harness) -> None:
    limits.make_queue(harness, "ttl", flow_control={"key_rate_limit": 5})
    post_keyed(harness, "ttl", [("a", 5), ("b", 5)], to_ms(harness.clock() + timedelta(seconds=3)))
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    paced = {i["sk"]["S"].split("#w#")[0]: "expire_at" in i for i in items if i["sk"]["S"].startswith("#pace")}
    assert paced == {"#pace#k#1:a": True, "#pace#k#1:b": True}


def test_a_key_concurrency_its_key_rate_cannot_reach_writes_no_slot_items(harness: Harness) -> None:
    """key_rate_limit 1 lets at most ~78 attempts of a key start within one paced lease (~77 s): a
    key_max_concurrency of 100 can refuse none, so attempts take no key slot and are all delivered."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "wide", flow_control={"key_rate_limit": 1, "key_max_concurrency": 100})
    post_keyed(harness, "wide", [("a", 5)] * 3 + [("b", 5)] * 3, to_ms(harness.clock() + timedelta(seconds=3)))
    limits.drain(harness)
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    slots = [i["sk"]["S"] for i in items if i["sk"]["S"].startswith("#slot")]
    assert (len(recorder.starts), slots) == (6, [])


def test_key_concurrency_holds_one_attempt_per_key(harness: Harness) -> None:
    recorder = limits.Recorder(harness, hold=0.2)
    harness.ctx.post = recorder
    limits.make_queue(harness, "narrow", flow_control={"key_max_concurrency": 1})
    post_keyed(harness, "narrow", [("a", 5)] * 4 + [("b", 5)] * 4, to_ms(harness.clock() + timedelta(seconds=2)))
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}
    lock = threading.Lock()
    inner = recorder.__call__

    def counting(url: str, body: bytes, headers: dict[str, str], **kw: Any) -> Any:
        key = json.loads(body)["k"]
        with lock:
            in_flight[key] = in_flight.get(key, 0) + 1
            peak[key] = max(peak.get(key, 0), in_flight[key])
        try:
            return inner(url, body, headers, **kw)
        finally:
            with lock:
                in_flight[key] -= 1

    harness.ctx.post = counting
    for _ in range(40):
        timers = harness.timers()
        if not timers:
            break
        harness.clock.now = max(harness.clock.now, from_ms(max(t["json"]["due"] for t in timers)))
        contexts = [limits.replace_context(harness) for _ in timers]
        threads = [
            threading.Thread(target=Dispatcher(c).run_batch, args=([(t["record"], t["body"])],))
            for c, t in zip(contexts, timers, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    starts = [at for at, _ in recorder.starts]
    assert (peak, len(recorder.starts)) == ({"a": 1, "b": 1}, 8)
    # Each slot was passed on by its holder's outcome, not by its lease running out (no release is written).
    assert max(starts) - min(starts) < contract.DEFAULT_DELIVERY_LEASE * 1000


def test_a_timer_that_does_not_know_its_key_is_put_back_and_handed_off_with_it(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "old", flow_control={"key_rate_limit": 5})
    post_keyed(harness, "old", [("a", 5)], to_ms(harness.clock() + timedelta(seconds=3)))
    [record] = harness.timers()
    keyless = {k: v for k, v in record["json"].items() if k != "k"}  # as an index without the key gives
    harness.clock.now = from_ms(keyless["due"])
    Dispatcher(harness.ctx).run_batch([("r", json.dumps(keyless))])
    assert recorder.starts == []
    [again] = harness.timers()
    assert again["json"]["k"] == "a"


def test_a_delivered_attempt_frees_its_key_slot_without_a_release(harness: Harness) -> None:
    """key_max_concurrency 1, three messages of one key due together, one dispatcher: each attempt takes the slot
    its predecessor's outcome freed, long before that one's lease would have (the fake clock stands still)."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "one", flow_control={"key_max_concurrency": 1})
    post_keyed(harness, "one", [("a", 5)] * 3, to_ms(harness.clock() + timedelta(seconds=2)))
    limits.drain(harness)
    items = harness.ddb.scan(TableName=harness.ctx.settings.table)["Items"]
    slots = [int(i["until"]["N"]) for i in items if i["sk"]["S"].startswith("#slot#k#a#")]
    starts = [at for at, _ in recorder.starts]
    assert (len(starts), max(starts) - min(starts) < 1_000) == (3, True)
    assert len(slots) == 1 and slots[0] > to_ms(harness.clock())  # held by the last attempt, never released
