"""Delivery windows through the services on in-process AWS with a fixed clock: deferral at admission, at a retry
and at the dispatcher's start, and a crowd waiting for one opening released within the queue's rate_limit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hourglass.core.timestamps import format_rfc3339, from_ms, parse_rfc3339, to_ms

from tests.integration.conftest import Harness
from tests.integration.test_rate_limits import Recorder, drain, over_bound

# The fake clock starts on Saturday 2026-11-21 10:00 UTC.
URL = "http://127.0.0.1:9/hook"
LUNCH = {"timezone": "UTC", "from": "12:00", "to": "13:00"}


def _queue(harness: Harness, name: str, **settings: Any) -> None:
    status, doc = harness.call("PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": URL}, **settings})
    assert status == 201, doc


def _post(harness: Harness, queue: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    status, doc = harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": list(messages)})
    assert status == 201, doc
    return list(doc["messages"])


def _get(harness: Harness, queue: str, message_id: str) -> dict[str, Any]:
    status, doc = harness.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
    assert status == 200, doc
    return dict(doc)


def _deliver_due(harness: Harness, until: str) -> None:
    """Sweeps and dispatches as the deployed system would, up to the instant `until`."""
    harness.clock.now = parse_rfc3339(until) - timedelta(seconds=60)
    harness.sweep()
    harness.dispatch(harness.timers())


def test_a_message_due_outside_its_queues_window_is_due_at_the_next_opening(harness: Harness) -> None:
    _queue(harness, "lunch", window=LUNCH)
    (created,) = _post(harness, "lunch", {"body": "soup"})
    assert _get(harness, "lunch", created["id"])["next_attempt_at"] == "2026-11-21T12:00:00.000Z"


def test_a_deferred_message_keeps_the_time_it_was_scheduled_for_as_its_due_at(harness: Harness) -> None:
    _queue(harness, "lunch", window=LUNCH)
    (created,) = _post(harness, "lunch", {"body": "soup", "delay": 60})
    shown = _get(harness, "lunch", created["id"])
    assert (shown["due_at"], shown["next_attempt_at"]) == ("2026-11-21T10:01:00.000Z", "2026-11-21T12:00:00.000Z")


def test_it_is_delivered_at_the_opening_not_before(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    _queue(harness, "lunch", window=LUNCH)
    (created,) = _post(harness, "lunch", {"body": "soup"})
    _deliver_due(harness, "2026-11-21T12:00:00Z")
    assert _get(harness, "lunch", created["id"])["status"] == "delivered"
    assert [from_ms(at) for at, _ in recorder.starts] == [parse_rfc3339("2026-11-21T12:00:00Z")]


def test_a_message_inside_the_window_keeps_its_due_time(harness: Harness) -> None:
    _queue(harness, "always", window={"from": "09:00", "to": "18:00"})
    (created,) = _post(harness, "always", {"body": 1, "delay": 30})
    assert created["due_at"] == "2026-11-21T10:00:30.000Z"


def test_a_messages_own_window_replaces_its_queues(harness: Harness) -> None:
    _queue(harness, "lunch", window=LUNCH)
    tokyo_morning = {"timezone": "Asia/Tokyo", "days": ["mon"], "from": "09:00", "to": "10:00"}
    (created,) = _post(harness, "lunch", {"body": "hi", "window": tokyo_morning})
    assert _get(harness, "lunch", created["id"])["next_attempt_at"] == "2026-11-23T00:00:00.000Z"  # Mon 09:00 Tokyo
    assert _get(harness, "lunch", created["id"])["window"]["timezone"] == "Asia/Tokyo"


def test_the_queue_document_shows_its_window(harness: Harness) -> None:
    _queue(harness, "lunch", window={**LUNCH, "days": ["fri", "mon"], "exclude_dates": ["2026-12-25"]})
    status, doc = harness.call("GET", "/v1/queues/lunch")
    assert status == 200
    assert doc["window"] == {
        "timezone": "UTC",
        "days": ["mon", "fri"],
        "from": "12:00",
        "to": "13:00",
        "exclude_dates": ["2026-12-25"],
    }


def test_a_bad_window_is_a_400_naming_the_field(harness: Harness) -> None:
    _queue(harness, "lunch")
    status, doc = harness.call(
        "POST", "/v1/queues/lunch/messages", {"messages": [{"body": 1, "window": {"from": "25:00", "to": "13:00"}}]}
    )
    assert status == 400
    assert doc["error"]["message"].startswith("messages[0].window.from")


def test_a_bad_queue_window_is_a_400_naming_the_field(harness: Harness) -> None:
    status, doc = harness.call("PUT", "/v1/queues/lunch", {"window": {**LUNCH, "days": ["mon", "xyz"]}})
    assert status == 400
    assert doc["error"]["message"].startswith("window.days[1]")


def test_a_retry_that_would_fall_outside_the_window_waits_for_the_next_opening(harness: Harness) -> None:
    harness.receiver.answers = [503]
    window = {"timezone": "UTC", "from": "10:00", "to": "10:01"}
    _queue(harness, "narrow", window=window, retry={"max_attempts": 3, "backoff_base": 120})
    (created,) = _post(harness, "narrow", {"body": 1})
    harness.dispatch(harness.timers())
    doc = _get(harness, "narrow", created["id"])
    assert (doc["status"], doc["attempts"], doc["next_attempt_at"]) == ("pending", 1, "2026-11-22T10:00:00.000Z")


def test_a_retry_deferred_past_its_expiry_expires(harness: Harness) -> None:
    harness.receiver.answers = [503]
    window = {"timezone": "UTC", "from": "10:00", "to": "10:01"}
    _queue(harness, "narrow", window=window, retry={"max_attempts": 3, "backoff_base": 120})
    (created,) = _post(harness, "narrow", {"body": 1, "ttl": 3600})
    harness.dispatch(harness.timers())
    assert _get(harness, "narrow", created["id"])["status"] == "expired"


def test_a_window_that_closed_while_the_message_waited_defers_it_at_the_start(harness: Harness) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    _queue(harness, "narrow", window={"timezone": "UTC", "from": "10:00", "to": "10:01"})
    (created,) = _post(harness, "narrow", {"body": 1, "delay": 30})
    timers = harness.timers()
    harness.clock.now = parse_rfc3339("2026-11-21T10:01:30Z")  # the dispatcher comes late (an outage)
    harness.dispatch(timers)
    doc = _get(harness, "narrow", created["id"])
    assert recorder.starts == []
    assert (doc["status"], doc["attempts"], doc["next_attempt_at"]) == ("pending", 0, "2026-11-22T10:00:00.000Z")


def test_a_schedules_occurrences_wait_for_its_window(harness: Harness) -> None:
    _queue(harness, "reports")
    window = {"timezone": "Europe/Paris", "days": ["mon"], "from": "09:00", "to": "10:00"}
    plan = {"cron": "0 * * * *", "body": 1, "window": window}
    status, doc = harness.call("PUT", "/v1/queues/reports/schedules/hourly", plan)
    assert status == 201, doc
    status, listed = harness.call("GET", "/v1/queues/reports/messages", params={"schedule": "hourly"})
    assert [m["next_attempt_at"] for m in listed["messages"]] == ["2026-11-23T08:00:00.000Z"]  # Monday 09:00 in Paris


def test_a_crowd_at_the_opening_is_released_within_the_rate_limit_in_due_order_and_inside_the_window(
    harness: Harness,
) -> None:
    recorder = Recorder(harness)
    harness.ctx.post = recorder
    # One message every 10 s and a 1-minute window: six start at the opening's pace, the rest wait a day.
    _queue(harness, "crowd", rate_limit=0.1, window={"timezone": "UTC", "from": "10:10", "to": "10:11"})
    due_ms = to_ms(harness.clock() + timedelta(seconds=5))
    burst = ({"body": i, "deliver_at": format_rfc3339(from_ms(due_ms + i))} for i in range(10))
    posted = _post(harness, "crowd", *burst)
    assert {_get(harness, "crowd", m["id"])["next_attempt_at"] for m in posted} == {"2026-11-21T10:10:00.000Z"}
    harness.clock.now = parse_rfc3339("2026-11-21T10:09:00Z")
    harness.sweep()
    drain(harness)
    opening, closing = (to_ms(parse_rfc3339(f"2026-11-21T10:1{m}:00Z")) for m in (0, 1))
    starts = [at for at, _ in recorder.starts]
    assert len(starts) == 6 and all(opening <= at < closing for at in starts)
    assert over_bound(starts, 0.1) == []
    waiting = [_get(harness, "crowd", m["id"]) for m in posted]
    deferred = sorted(m["next_attempt_at"] for m in waiting if m["status"] == "pending")
    assert deferred == ["2026-11-22T10:10:00.000Z"] * 4
