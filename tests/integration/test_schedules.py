"""Schedules under mock_aws with a fixed clock: occurrences as messages, chaining, pause, resume, delete, replace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hourglass.core.ids import occurrence_id
from hourglass.errors import StoreError
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import schedules

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue

PATH = "/v1/queues/orders/schedules"


def put(h: Harness, name: str, doc: dict[str, Any]) -> tuple[int, Any]:
    return h.call("PUT", f"{PATH}/{name}", doc)


def occurrences(h: Harness, name: str, status: str | None = None) -> list[dict[str, Any]]:
    params = {"schedule": name, **({"status": status} if status else {})}
    code, doc = h.call("GET", "/v1/queues/orders/messages", params=params)
    assert code == 200, doc
    return sorted(doc["messages"], key=lambda m: m["due_at"])


def run_until(h: Harness, until: datetime) -> None:
    """Sweeps and dispatches the way the runtime does, until the fake clock reaches `until`."""
    while h.clock.now < until:
        h.sweep()
        h.dispatch(h.timers())
        h.clock.now = min(until, h.clock.now + timedelta(seconds=60))
    h.sweep()
    h.dispatch(h.timers())


def test_put_creates_then_replaces_and_shows_next_three_occurrences(harness: Harness) -> None:
    make_queue(harness)
    code, doc = put(harness, "hourly", {"every": 3600, "body": {"tick": 1}})
    assert code == 201
    assert doc["next_due_at"] == ["2026-11-21T11:00:00.000Z", "2026-11-21T12:00:00.000Z", "2026-11-21T13:00:00.000Z"]
    code, _ = put(harness, "hourly", {"every": 7200, "body": {"tick": 2}})
    assert code == 200


def test_put_materializes_the_next_occurrence_as_a_message_with_a_derived_id(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": {"tick": 1}})
    [pending] = occurrences(harness, "hourly")
    at = datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    queue = harness.ctx.store.get_queue("orders")
    assert queue is not None
    assert (pending["id"], pending["due_at"], pending["schedule"]) == (
        occurrence_id("orders", "hourly", at, 1, queue.created_at),
        "2026-11-21T11:00:00.000Z",
        "hourly",
    )


def test_materializing_twice_stores_one_message(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    schedule = harness.ctx.store.get_schedule("orders", "hourly")
    queue = harness.ctx.store.get_queue("orders")
    assert schedule is not None and queue is not None
    again = schedules.materialize(harness.ctx, schedule, queue, harness.clock.now, harness.clock.now)
    assert again is None
    assert len(occurrences(harness, "hourly")) == 1


def test_each_occurrence_is_delivered_once_on_time_with_the_schedule_header(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": {"n": 1}})
    run_until(harness, harness.clock.now + timedelta(seconds=185))
    delivered = occurrences(harness, "minutely", "delivered")
    due = [m["due_at"] for m in delivered]
    assert due[:3] == ["2026-11-21T10:01:00.000Z", "2026-11-21T10:02:00.000Z", "2026-11-21T10:03:00.000Z"]
    assert all(m["delivered_at"] >= m["due_at"] for m in delivered)
    assert len(harness.receiver.requests) == len(set(due)) == len(due)
    assert {r["headers"]["Hourglass-Schedule"] for r in harness.receiver.requests} == {"minutely"}
    assert len(occurrences(harness, "minutely", "pending")) == 1


def test_sqs_occurrence_envelope_names_the_schedule(harness: Harness) -> None:
    url = harness.sqs.create_queue(QueueName="target-s")["QueueUrl"]
    make_queue(harness, settings={"target": {"type": "sqs", "queue_url": url}})
    put(harness, "minutely", {"every": 60, "body": "x"})
    run_until(harness, harness.clock.now + timedelta(seconds=65))
    envelopes = harness.target_messages(url)
    assert envelopes and {(e["schedule"], e["body"]) for e in envelopes} == {("minutely", "x")}


def test_pause_cancels_the_pending_occurrence_and_skips_while_paused(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": 1})
    code, doc = harness.call("POST", f"{PATH}/minutely/pause")
    assert (code, doc["paused"], doc["next_due_at"]) == (200, True, [])
    run_until(harness, harness.clock.now + timedelta(seconds=300))
    assert harness.receiver.requests == []
    assert [m["status"] for m in occurrences(harness, "minutely")] == ["cancelled"]


def test_resume_continues_from_the_next_occurrence_after_now(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": 1})
    harness.call("POST", f"{PATH}/minutely/pause")
    harness.clock.advance(150)
    code, doc = harness.call("POST", f"{PATH}/minutely/resume")
    assert (code, doc["paused"]) == (200, False)
    run_until(harness, harness.clock.now + timedelta(seconds=40))
    assert occurrences(harness, "minutely", "delivered")[0]["due_at"] == "2026-11-21T10:03:00.000Z"
    assert all(r["headers"]["Hourglass-Due-At"] >= "2026-11-21T10:03" for r in harness.receiver.requests)


def test_delete_cancels_the_pending_occurrence(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    code, _ = harness.call("DELETE", f"{PATH}/hourly")
    assert code == 204
    assert [m["status"] for m in occurrences(harness, "hourly")] == ["cancelled"]
    assert harness.call("GET", f"{PATH}/hourly")[0] == 404


def test_replace_cancels_the_pending_occurrence_and_plans_from_the_new_rule(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "job", {"every": 3600, "body": 1})
    put(harness, "job", {"cron": "30 10 * * *", "body": 2})
    found = occurrences(harness, "job")
    assert [(m["due_at"], m["status"]) for m in found] == [
        ("2026-11-21T10:30:00.000Z", "pending"),
        ("2026-11-21T11:00:00.000Z", "cancelled"),
    ]


def test_occurrence_of_a_replaced_rule_that_escaped_cancel_is_not_delivered(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "job", {"every": 60, "body": 1})
    harness.clock.advance(30)
    timers = harness.timers()  # the old occurrence's timer is already on its way
    put(harness, "job", {"every": 120, "body": 2})
    harness.dispatch(timers)
    assert harness.receiver.requests == []


# The sweep walks every minute of the day the clock skips, shard by shard (~24,000 due-index queries on moto,
# half a minute or more): `make test-slow`.
@pytest.mark.slow
def test_cron_occurrences_follow_london_time_across_the_autumn_change(harness: Harness) -> None:
    harness.clock.now = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    make_queue(harness)
    code, doc = put(harness, "night", {"cron": "30 1 * * *", "timezone": "Europe/London", "body": 1})
    assert code == 201
    # 01:30 happens twice on 25 October: it fires once, at the first (BST, 00:30Z).
    assert doc["next_due_at"] == ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z", "2026-10-27T01:30:00.000Z"]
    harness.clock.now = datetime(2026, 10, 25, 0, 28, tzinfo=UTC)
    run_until(harness, datetime(2026, 10, 25, 0, 31, tzinfo=UTC))
    harness.clock.now = datetime(2026, 10, 25, 1, 28, tzinfo=UTC)  # the second 01:30 (GMT) passes silently
    run_until(harness, datetime(2026, 10, 25, 1, 31, tzinfo=UTC))
    harness.clock.now = datetime(2026, 10, 26, 1, 28, tzinfo=UTC)
    run_until(harness, datetime(2026, 10, 26, 1, 31, tzinfo=UTC))
    delivered = occurrences(harness, "night", "delivered")
    assert [m["due_at"] for m in delivered] == ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"]
    assert len(harness.receiver.requests) == 2


def test_cron_in_the_spring_gap_fires_after_the_gap(harness: Harness) -> None:
    harness.clock.now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    make_queue(harness)
    _, doc = put(harness, "night", {"cron": "30 1 * * *", "timezone": "Europe/London", "body": 1})
    # 01:30 does not exist on 29 March: it fires at 02:30 BST, which is 01:30Z.
    assert doc["next_due_at"][:2] == ["2026-03-29T01:30:00.000Z", "2026-03-30T00:30:00.000Z"]


def test_crash_before_the_next_occurrence_is_stored_loses_none_and_duplicates_none(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": 1})
    timers = harness.timers()
    real = harness.ctx.store.put_occurrence

    def crash(*_: Any, **__: Any) -> bool:
        raise StoreError("runtime died")

    monkeypatch.setattr(harness.ctx.store, "put_occurrence", crash)
    harness.dispatch(timers)  # delivered and recorded; storing the next one (after the outcome) fails
    assert [m["status"] for m in occurrences(harness, "minutely")] == ["delivered"]
    monkeypatch.setattr(harness.ctx.store, "put_occurrence", real)
    harness.dispatch(timers)  # the timer again: its occurrence has moved on, nothing is delivered twice
    assert sweeper_handler.handle(harness.ctx, {}, None)["chains_repaired"] == 1
    run_until(harness, datetime(2026, 11, 21, 10, 2, 5, tzinfo=UTC))
    delivered = occurrences(harness, "minutely", "delivered")
    due = [m["due_at"] for m in delivered]
    assert due[:2] == ["2026-11-21T10:01:00.000Z", "2026-11-21T10:02:00.000Z"]
    assert len(due) == len(set(due)) == len(harness.receiver.requests)
    assert len(occurrences(harness, "minutely", "pending")) == 1


def test_an_occurrence_whose_schedule_read_lags_at_its_claim_chains_after_its_outcome(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    read = harness.ctx.store.get_schedule

    def lagging(queue: str, name: str, *, consistent: bool = True) -> Any:
        # The sweep's claim reads the schedule eventually consistently: here that read has not caught up.
        return read(queue, name) if consistent else None

    monkeypatch.setattr(harness.ctx.store, "get_schedule", lagging)
    run_until(harness, datetime(2026, 11, 21, 11, 0, 5, tzinfo=UTC))
    assert [m["due_at"] for m in occurrences(harness, "hourly", "delivered")] == ["2026-11-21T11:00:00.000Z"]
    assert [m["due_at"] for m in occurrences(harness, "hourly", "pending")] == ["2026-11-21T12:00:00.000Z"]


def test_schedule_errors_name_the_field_and_change_nothing(harness: Harness) -> None:
    make_queue(harness)
    for doc, field in (
        ({"every": 30, "body": 1}, "every"),
        ({"cron": "61 * * * *", "body": 1}, "cron"),
        ({"every": 60, "timezone": "Mars/Olympus", "body": 1}, "timezone"),
        ({"every": 60}, "body"),
    ):
        code, answer = put(harness, "bad", doc)
        assert code == 400 and field in answer["error"]["message"], (doc, answer)
    assert harness.call("GET", PATH)[1] == {"schedules": [], "next_cursor": None}


def test_list_pages_schedules(harness: Harness) -> None:
    make_queue(harness)
    for name in ("a", "b", "c"):
        put(harness, name, {"every": 3600, "body": name})
    _, first = harness.call("GET", PATH, params={"limit": "2"})
    _, second = harness.call("GET", PATH, params={"limit": "2", "cursor": first["next_cursor"]})
    assert [s["name"] for s in first["schedules"] + second["schedules"]] == ["a", "b", "c"]


def test_one_off_message_in_local_time(harness: Harness) -> None:
    make_queue(harness)
    code, doc = harness.call(
        "POST",
        "/v1/queues/orders/messages",
        {"messages": [{"body": 1, "deliver_at": "2026-12-24T09:00:00", "timezone": "America/New_York"}]},
    )
    assert (code, doc["messages"][0]["due_at"]) == (201, "2026-12-24T14:00:00.000Z")


def test_the_sweep_stores_the_next_occurrence_when_it_claims_one(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    harness.clock.now = datetime(2026, 11, 21, 10, 58, tzinfo=UTC)
    harness.sweep()  # claims 11:00 for its hand-off: 12:00 is stored with it, before 11:00 is delivered
    assert [m["due_at"] for m in occurrences(harness, "hourly", "pending")] == [
        "2026-11-21T11:00:00.000Z",
        "2026-11-21T12:00:00.000Z",
    ]
    harness.dispatch(harness.timers())
    assert [(m["due_at"], m["status"]) for m in occurrences(harness, "hourly")] == [
        ("2026-11-21T11:00:00.000Z", "delivered"),
        ("2026-11-21T12:00:00.000Z", "pending"),
    ]


def test_delete_cancels_the_occurrence_stored_at_the_claim_too(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    harness.clock.now = datetime(2026, 11, 21, 10, 58, tzinfo=UTC)
    harness.sweep()
    assert harness.call("DELETE", f"{PATH}/hourly")[0] == 204
    assert [m["status"] for m in occurrences(harness, "hourly")] == ["cancelled", "cancelled"]


def test_a_paused_queue_occurrence_claimed_by_the_sweep_leaves_its_next_one_to_its_delivery(
    harness: Harness,
) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "body": 1})
    harness.call("POST", "/v1/queues/orders/pause")
    harness.clock.now = datetime(2026, 11, 21, 10, 58, tzinfo=UTC)
    harness.sweep()
    assert [m["due_at"] for m in occurrences(harness, "hourly", "pending")] == ["2026-11-21T11:00:00.000Z"]
