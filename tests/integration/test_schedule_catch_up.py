"""Schedule policies (v1.2): what `catch_up` delivers of the occurrences missed while the schedule or its
queue was paused or Hourglass was down, and `jitter`, which delays each occurrence, never early."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.timestamps import from_ms

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue
from tests.integration.test_schedules import PATH, occurrences, put

# Paused at 10:00 with the first occurrence due at 11:00; back at 13:30: 11:00, 12:00 and 13:00 were missed.
MISSED = [datetime(2026, 11, 21, hour, tzinfo=UTC) for hour in (11, 12, 13)]
EXPECTED = {"skip": [], "latest": MISSED[-1:], "all": MISSED}
NEXT = "2026-11-21T14:00:00.000Z"


def delivered(h: Harness) -> list[datetime]:
    """The occurrence times of the delivered occurrences (a late one is due when it was stored)."""
    schedule = h.ctx.store.get_schedule("orders", "hourly")
    assert schedule is not None
    ids = {m["id"] for m in occurrences(h, "hourly", "delivered")}
    return [at for at in MISSED if schedule.occurrence_id(at) in ids] if len(ids) <= len(MISSED) else []


def drain(h: Harness) -> None:
    """Sweeps and dispatches what is due now (later timers are dropped: their messages stay pending)."""
    for _ in range(6):
        h.sweep()
        now_ms = h.clock.now.timestamp() * 1000
        h.dispatch([t for t in h.timers() if t["json"]["due"] <= now_ms])


def hourly(h: Harness, catch_up: str) -> None:
    make_queue(h)
    assert put(h, "hourly", {"every": 3600, "body": 1, "catch_up": catch_up})[0] == 201


def pause_schedule(h: Harness) -> Callable[[], None]:
    assert h.call("POST", f"{PATH}/hourly/pause")[0] == 200
    return lambda: None if h.call("POST", f"{PATH}/hourly/resume")[0] == 200 else pytest.fail("resume")


def pause_queue(h: Harness) -> Callable[[], None]:
    assert h.call("POST", "/v1/queues/orders/pause")[0] == 200
    return lambda: None if h.call("POST", "/v1/queues/orders/resume")[0] == 200 else pytest.fail("resume")


def outage(h: Harness) -> Callable[[], None]:
    """The sweeper and dispatchers stop: nothing runs until the clock has moved on."""
    return lambda: None


@pytest.mark.parametrize("stop", [pause_schedule, pause_queue, outage], ids=["schedule", "queue", "outage"])
@pytest.mark.parametrize("catch_up", ["skip", "latest", "all"])
def test_missed_occurrences_are_delivered_as_the_policy_says(
    harness: Harness, catch_up: str, stop: Callable[[Harness], Callable[[], None]]
) -> None:
    hourly(harness, catch_up)
    restart = stop(harness)
    harness.clock.advance(int(timedelta(hours=3, minutes=30).total_seconds()))
    restart()
    drain(harness)
    assert (delivered(harness), len(occurrences(harness, "hourly", "delivered"))) == (
        EXPECTED[catch_up],
        len(EXPECTED[catch_up]),
    )
    assert [m["due_at"] for m in occurrences(harness, "hourly", "pending")] == [NEXT]


def test_a_late_occurrence_not_yet_overtaken_is_delivered_under_skip(harness: Harness) -> None:
    hourly(harness, "skip")
    harness.clock.advance(int(timedelta(hours=1, minutes=30).total_seconds()))
    drain(harness)
    assert delivered(harness) == MISSED[:1]


def test_the_default_policy_is_skip_with_no_jitter(harness: Harness) -> None:
    make_queue(harness)
    code, doc = put(harness, "hourly", {"every": 3600, "body": 1})
    assert (code, doc["catch_up"], doc["jitter"]) == (201, "skip", 0)


def test_jitter_delays_each_occurrence_within_its_bound_and_next_due_at_shows_it(harness: Harness) -> None:
    make_queue(harness)
    code, doc = put(harness, "minutely", {"every": 60, "body": 1, "jitter": 30})
    assert code == 201 and doc["jitter"] == 30
    [pending] = occurrences(harness, "minutely", "pending")
    assert pending["due_at"] == doc["next_due_at"][0]
    for shown, plain in zip(doc["next_due_at"], ["10:01", "10:02", "10:03"], strict=True):
        at = from_ms(0).replace(year=2026, month=11, day=21, hour=10, minute=int(plain[-2:]))
        shown_at = from_ms(0).fromisoformat(shown.replace("Z", "+00:00"))
        assert at <= shown_at <= at + timedelta(seconds=30)
    assert len(set(doc["next_due_at"])) == 3


def test_jitter_is_the_same_each_time_an_occurrence_is_planned(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": 1, "jitter": 600})
    schedule = harness.ctx.store.get_schedule("orders", "minutely")
    assert schedule is not None
    at = schedule.next_after(harness.clock.now)
    assert at is not None
    assert schedule.due(at) == schedule.due(at) and at <= schedule.due(at) <= at + timedelta(seconds=600)


@pytest.mark.parametrize(("field", "value"), [("catch_up", "some"), ("jitter", 3601), ("jitter", -1), ("jitter", "5")])
def test_bad_policies_are_a_400_naming_the_field(harness: Harness, field: str, value: object) -> None:
    make_queue(harness)
    code, doc = put(harness, "hourly", {"every": 3600, "body": 1, field: value})
    assert code == 400 and field in str(doc)


# A window closed from 10:00 to 11:00 UTC each day (open from 11:00 to 10:00 the next day); the clock starts at 10:00.
NIGHT_WINDOW = {"timezone": "UTC", "from": "11:00", "to": "10:00"}
SATURDAY = datetime(2026, 11, 21, 10, tzinfo=UTC)


@pytest.mark.parametrize("catch_up", ["skip", "latest"])
def test_a_closed_window_sends_one_occurrence_of_its_stretch_at_the_opening(harness: Harness, catch_up: str) -> None:
    make_queue(harness, settings={"target": {"type": "http", "url": "http://127.0.0.1:9/hook"}, "window": NIGHT_WINDOW})
    assert put(harness, "often", {"every": 900, "body": 1, "catch_up": catch_up})[0] == 201
    for minutes in (20, 35, 50):  # the sweeper runs while the window is closed (its chain repair included)
        harness.clock.now = SATURDAY + timedelta(minutes=minutes)
        drain(harness)
    harness.clock.now = SATURDAY + timedelta(hours=1, seconds=30)
    drain(harness)
    schedule = harness.ctx.store.get_schedule("orders", "often")
    assert schedule is not None
    sent = {m["id"] for m in occurrences(harness, "often", "delivered")}
    # Of 10:15, 10:30 and 10:45 (deferred to 11:00) only the latest goes; then 11:00's own.
    expected = [SATURDAY + timedelta(minutes=45), SATURDAY + timedelta(hours=1)]
    assert sent == {schedule.occurrence_id(at) for at in expected}
