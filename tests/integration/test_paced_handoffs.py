"""Hand-offs that take pacing slots on a rate-limited queue (fixed clock, in-process AWS): bulk shift
and redeliver, a paused queue's drain after resume, schedule occurrences."""

from __future__ import annotations

import itertools
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import read_timers
from hourglass.core.pacing import item_at, pace
from hourglass.core.timestamps import format_rfc3339, from_ms, parse_rfc3339, to_ms
from hourglass.handlers import api as api_handler
from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.service.rest import Api

from tests.integration.conftest import Harness
from tests.integration.test_rate_limits import make_queue, post_burst

RATE = 2.0
SPACING_MS = pace(RATE).spacing_us / 1000


def paced_timers(harness: Harness) -> dict[str, dict[str, Any]]:
    """The timer queue's timers by message id; each must carry a pacing slot (`l`, its latest start)."""
    unpacked = [timer for sent in harness.timers() for timer in read_timers(sent["body"])]
    timers = {t.id: {"due": t.due_ms, "l": t.latest_ms} for t in unpacked}
    assert all(t["l"] is not None for t in timers.values()), timers
    return timers


def assert_spaced_and_never_early(timers: dict[str, dict[str, Any]], due: dict[str, int]) -> None:
    """Slots never before due and at least 1/rate apart."""
    slots = sorted(t["due"] for t in timers.values())
    assert all(timers[i]["due"] >= due[i] for i in timers)
    assert all(b - a >= SPACING_MS - 1 for a, b in itertools.pairwise(slots))


def assert_due_order_within_pages(timers: dict[str, dict[str, Any]], due: dict[str, int]) -> None:
    """An operation pages each segment (the id's first hex digit) on its own: each page's slots follow due order."""
    for segment in {i[0] for i in timers}:
        page = sorted((i for i in timers if i[0] == segment), key=lambda i: due[i])
        slots = [timers[i]["due"] for i in page]
        assert slots == sorted(slots), segment


def operation(harness: Harness, queue: str, doc: dict[str, Any]) -> dict[str, Any]:
    status, started = harness.call("POST", f"/v1/queues/{queue}/operations", doc)
    assert status == 202, started
    _, done = harness.call("GET", f"/v1/queues/{queue}/operations/{started['id']}")
    return dict(done)


def test_bulk_shift_on_a_rate_limited_queue_takes_slots_in_due_order(harness: Harness) -> None:
    make_queue(harness, "paced", rate_limit=RATE)
    # Due in reverse order of creation, so neither id order nor creation order is due order.
    start = to_ms(harness.clock() + timedelta(seconds=600))
    due = {}
    for k in range(48):
        due.update(post_burst(harness, "paced", 1, start + (48 - k) * 7))
    harness.timers()  # nothing is due within the lookahead yet
    operation(harness, "paced", {"action": "shift", "seconds": -590})
    shifted = {i: d - 590_000 for i, d in due.items()}
    timers = paced_timers(harness)
    assert set(timers) == set(due)
    assert_spaced_and_never_early(timers, shifted)
    assert_due_order_within_pages(timers, shifted)
    assert any(len([i for i in timers if i[0] == segment]) > 2 for segment in "0123456789abcdef")


def test_bulk_redeliver_on_a_rate_limited_queue_takes_slots_in_due_order(harness: Harness) -> None:
    harness.ctx.post = lambda *_, **__: HttpReply(status=400, headers={}, body=b"")
    make_queue(harness, "paced", rate_limit=RATE)
    due = post_burst(harness, "paced", 6, to_ms(harness.clock() + timedelta(seconds=2)))
    harness.dispatch(harness.timers())
    failed = {i for i in due if harness.call("GET", f"/v1/queues/paced/messages/{i}")[1]["status"] == "failed"}
    assert failed == set(due)
    done = operation(harness, "paced", {"action": "redeliver"})
    timers = paced_timers(harness)
    assert set(timers) == set(due), done
    # Redelivered messages are due now: each takes a slot from the pacing item, one slot apart.
    assert_spaced_and_never_early(timers, {i: to_ms(harness.clock()) for i in timers})


def test_a_schedule_occurrence_on_a_rate_limited_queue_takes_the_first_free_slot_at_its_due_time(
    harness: Harness,
) -> None:
    """A burst handed off before it, due later, does not push the occurrence behind it (a calendar, not a
    cursor); its slot is a spacing from every slot of the burst."""
    make_queue(harness, "paced", rate_limit=RATE)
    at = (harness.clock() + timedelta(seconds=120)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    burst = post_burst(harness, "paced", 3, to_ms(at))
    status, doc = harness.call("PUT", "/v1/queues/paced/schedules/tick", {"every": 60, "body": {"tick": 1}})
    assert status == 201, doc
    _, listed = harness.call("GET", "/v1/queues/paced/messages", params={"schedule": "tick"})
    [occurrence] = listed["messages"]
    due = to_ms(parse_rfc3339(occurrence["due_at"]))
    assert due <= to_ms(at)  # due with (or before) the burst
    timers = paced_timers(harness)
    slot = timers[occurrence["id"]]["due"]
    assert due <= slot < due + SPACING_MS
    assert all(abs(slot - timers[i]["due"]) >= SPACING_MS - 1 for i in burst)


def test_a_schedule_occurrence_whose_write_outlasts_the_safety_margin_still_takes_a_pacing_slot(
    harness: Harness,
) -> None:
    """Due past the hand-off window when placed, so stored with index keys only; its write lands when the
    window has reached it, so its writer hands it off (the catch-up) with a slot like any other."""
    make_queue(harness, "paced", rate_limit=RATE)
    put = harness.ctx.store.put_occurrence

    def slow_put(message: Any, keys: Any) -> bool:
        stored = put(message, keys)
        harness.clock.now = max(harness.clock.now, message.due_at - timedelta(seconds=60))
        return stored

    harness.ctx.store.put_occurrence = slow_put  # type: ignore[method-assign]
    status, doc = harness.call("PUT", "/v1/queues/paced/schedules/tick", {"every": 3600, "body": {"tick": 1}})
    assert status == 201, doc
    _, listed = harness.call("GET", "/v1/queues/paced/messages", params={"schedule": "tick"})
    [occurrence] = listed["messages"]
    assert set(paced_timers(harness)) == {occurrence["id"]}


def test_a_bulk_shift_whose_write_outlasts_the_safety_margin_still_takes_a_pacing_slot(harness: Harness) -> None:
    make_queue(harness, "paced", rate_limit=RATE)
    due = post_burst(harness, "paced", 1, to_ms(harness.clock() + timedelta(seconds=3600)))
    reschedule = harness.ctx.store.reschedule

    def slow_reschedule(change: Any, keys: Any, **options: Any) -> Any:
        written = reschedule(change, keys, **options)
        harness.clock.now = max(harness.clock.now, change.message.due_at - timedelta(seconds=60))
        return written

    harness.ctx.store.reschedule = slow_reschedule  # type: ignore[method-assign]
    operation(harness, "paced", {"action": "shift", "seconds": -3000})
    assert set(paced_timers(harness)) == set(due)


def test_a_resumed_rate_limited_queue_drains_its_paused_messages_in_due_order(harness: Harness) -> None:
    """The timers parked by a pause come back in separate batches, in reverse due order, to concurrent
    dispatcher threads of one process: they gather and take slots together, so delivery follows due
    order. Real clock: gathering is between threads that wait at once (a fixed clock would serialize them)."""
    starts: list[int] = []
    lock = threading.Lock()

    def receive(url: str, body: bytes, headers: dict[str, str], **_: Any) -> HttpReply:
        with lock:
            starts.append(json.loads(body))
        return HttpReply(status=200, headers={}, body=b"")

    base = harness.ctx
    ctx = Context(
        settings=base.settings,
        store=Store(base.settings.table, client=base.store.client),
        timers=base.timers,
        targets=base.targets,
        metrics=base.metrics,
        clock=lambda: datetime.now(UTC),
        sleep=time.sleep,
        post=receive,
        check_url=base.check_url,
    )
    api = Api(ctx)

    def call(method: str, path: str, body: Any = None) -> Any:
        event = {"httpMethod": method, "path": path, "headers": {"content-type": "application/json"}}
        response = api_handler.handle(api, event | {"body": None if body is None else json.dumps(body)})
        assert response["statusCode"] < 300, response
        return json.loads(response["body"]) if response["body"] else None

    call("PUT", "/v1/queues/drain", {"target": {"type": "http", "url": "http://127.0.0.1:9/x"}, "rate_limit": 4})
    first = to_ms(datetime.now(UTC)) + 1500
    batch = [{"body": i, "deliver_at": format_rfc3339(from_ms(first + i))} for i in range(8)]
    call("POST", "/v1/queues/drain/messages", {"messages": batch})
    parked = harness.timers()
    call("POST", "/v1/queues/drain/pause")
    Dispatcher(ctx).run_batch([(t["record"], t["body"]) for t in parked])
    assert starts == []
    call("POST", "/v1/queues/drain/resume")
    back = sorted(harness.timers(), key=lambda t: -int(t["json"]["due"]))
    assert len(back) >= 2  # several batches, latest due first
    dispatcher = Dispatcher(ctx)
    threads = [threading.Thread(target=dispatcher.run_batch, args=([(t["record"], t["body"])],)) for t in back]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(30)
    assert starts == list(range(8))


def test_timers_that_arrive_after_their_slots_take_new_ones_together_in_due_order(harness: Harness) -> None:
    """One dispatcher batch of timers all past their slots' windows: one pacing write for all of
    them, before any is processed, and the new slots follow the messages' due order."""
    make_queue(harness, "late", rate_limit=RATE)
    due = post_burst(harness, "late", 5, to_ms(harness.clock() + timedelta(seconds=2)))
    sent = harness.timers()
    latest = max(timer.latest_ms or 0 for s in sent for timer in read_timers(s["body"]))
    harness.clock.now = from_ms(latest + 5_000)  # every timer reaches the dispatcher after its window
    store = harness.ctx.store
    writes: list[int] = []
    advance = store.advance_pace
    store.advance_pace = lambda *args: (writes.append(1), advance(*args))[1]  # type: ignore[method-assign]
    dispatcher = Dispatcher(harness.ctx)
    handed: list[tuple[str, int]] = []
    process = dispatcher.process_timer

    def recording(timer: Any, repaces: int = 0) -> Any:
        with lock:
            if not handed:
                handed.append(("writes before processing", len(writes)))
            handed.append((timer.id, timer.due_ms))
        return process(timer, repaces)

    lock = threading.Lock()
    dispatcher.process_timer = recording  # type: ignore[method-assign]
    dispatcher.run_batch([(s["record"], s["body"]) for s in sent])
    slots = dict(handed[1:])
    windows = {item_at(None, RATE, at * 1000) for at in slots.values()}
    assert handed[0] == ("writes before processing", len(windows))  # one per window the new slots fall in
    in_due_order = sorted(slots, key=lambda i: due[i])
    assert [slots[i] for i in in_due_order] == sorted(slots.values())
    assert min(slots.values()) > latest  # new slots, not the missed ones
