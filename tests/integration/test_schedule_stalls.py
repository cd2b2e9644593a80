"""A schedule does not depend on the fate of one occurrence: however one ends, or a writer dies between two
writes, the schedule still has its next occurrence (issue 23, rule 4)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.errors import StoreError
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import transitions
from hourglass.service.dead_letters import DeadLetters

from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, make_queue
from tests.integration.test_schedules import PATH, occurrences, put, run_until


def pending(h: Harness) -> list[str]:
    return [m["due_at"] for m in occurrences(h, "hourly", "pending")]


def hourly(h: Harness, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    make_queue(h, settings=settings)
    assert put(h, "hourly", {"every": 3600, "body": 1})[0] == 201
    [first] = occurrences(h, "hourly", "pending")
    return first


def scheduled_sweep(h: Harness) -> dict[str, Any]:
    return sweeper_handler.handle(h.ctx, {}, None)


def test_cancelling_the_pending_occurrence_leaves_the_next_one(harness: Harness) -> None:
    first = hourly(harness)
    assert harness.call("DELETE", f"/v1/queues/orders/messages/{first['id']}")[0] == 204
    assert pending(harness) == ["2026-11-21T12:00:00.000Z"]


def test_the_next_occurrence_after_a_cancelled_one_is_delivered(harness: Harness) -> None:
    first = hourly(harness)
    harness.call("DELETE", f"/v1/queues/orders/messages/{first['id']}")
    run_until(harness, harness.clock.now + timedelta(hours=2, seconds=5))
    assert [m["due_at"] for m in occurrences(harness, "hourly", "delivered")] == ["2026-11-21T12:00:00.000Z"]


def test_a_bulk_cancel_leaves_the_next_occurrence(harness: Harness) -> None:
    hourly(harness)
    assert harness.call("POST", "/v1/queues/orders/operations", {"action": "cancel"})[0] == 202
    assert pending(harness) == ["2026-11-21T12:00:00.000Z"]


def test_an_occurrence_expired_by_patch_leaves_the_next_one(harness: Harness) -> None:
    first = hourly(harness, {**HTTP_QUEUE, "ttl": 7200})
    status, doc = harness.call("PATCH", f"/v1/queues/orders/messages/{first['id']}", {"delay": 20000})
    assert (status, doc["status"]) == (200, "expired")
    assert pending(harness) == ["2026-11-21T12:00:00.000Z"]


def test_an_occurrence_failed_by_the_dlq_consumer_leaves_the_next_one(harness: Harness) -> None:
    make_queue(harness)
    put(harness, "hourly", {"every": 3600, "start_at": "2026-11-21T10:00:30Z", "body": 1})
    [timer] = harness.timers()
    assert DeadLetters(harness.ctx).run_batch([("r1", timer["body"], 11)]) == []
    assert [m["status"] for m in occurrences(harness, "hourly")] == ["failed", "pending"]


def test_an_occurrence_failed_by_its_target_leaves_the_next_one(harness: Harness) -> None:
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}})
    put(harness, "hourly", {"every": 3600, "body": 1})
    harness.receiver.answers = [500]
    run_until(harness, harness.clock.now + timedelta(hours=1, seconds=5))
    assert [m["status"] for m in occurrences(harness, "hourly")] == ["failed", "pending"]


def test_a_schedule_whose_first_occurrence_was_never_stored_gets_it_from_the_sweep(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)

    def crash(*_: Any, **__: Any) -> bool:
        raise StoreError("runtime died")

    monkeypatch.setattr(harness.ctx.store, "put_occurrence", crash)
    assert put(harness, "hourly", {"every": 3600, "body": 1})[0] == 503  # stored, its occurrence not
    monkeypatch.undo()
    assert harness.call("GET", f"{PATH}/hourly")[0] == 200 and pending(harness) == []
    assert scheduled_sweep(harness)["chains_repaired"] == 1
    assert pending(harness) == ["2026-11-21T11:00:00.000Z"]


def test_the_repair_leaves_a_schedule_with_its_next_occurrence_alone(harness: Harness) -> None:
    hourly(harness)
    assert scheduled_sweep(harness)["chains_repaired"] == 0
    assert pending(harness) == ["2026-11-21T11:00:00.000Z"]


def test_the_repair_does_not_revive_a_paused_schedule(harness: Harness) -> None:
    hourly(harness)
    harness.call("POST", f"{PATH}/hourly/pause")
    assert scheduled_sweep(harness)["chains_repaired"] == 0
    assert pending(harness) == []


def test_the_repair_goes_round_every_schedule_a_batch_per_sweep(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)
    monkeypatch.setattr(harness.ctx.store, "put_occurrence", lambda *_: False)  # none stored at PUT
    for name in ("a", "b", "c"):
        put(harness, name, {"every": 3600, "body": 1})
    monkeypatch.undo()
    repaired = [transitions.repair(harness.ctx, limit=2) for _ in range(3)]
    assert repaired == [2, 1, 0]
    assert all(occurrences(harness, name, "pending") for name in ("a", "b", "c"))


def test_a_new_repair_round_waits_a_minute_from_the_last_start(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)
    put(harness, "a", {"every": 3600, "body": 1})
    assert transitions.repair(harness.ctx) == 0  # a round: nothing to repair
    monkeypatch.setattr(harness.ctx.store, "put_occurrence", lambda *_: False)  # none stored at PUT
    put(harness, "hourly", {"every": 3600, "body": 1})
    monkeypatch.undo()
    harness.clock.now += timedelta(seconds=59)
    assert transitions.repair(harness.ctx) == 0  # no new round yet: nothing is read
    assert pending(harness) == []
    harness.clock.now += timedelta(seconds=1)
    assert transitions.repair(harness.ctx) == 1
    assert pending(harness) == ["2026-11-21T11:00:00.000Z"]


def test_the_repair_reads_the_schedules_of_each_queue_in_its_batch(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    queues = ("orders", "other")
    for queue in queues:
        make_queue(harness, queue)
    monkeypatch.setattr(harness.ctx.store, "put_occurrence", lambda *_: False)  # none stored at PUT
    for queue in queues:
        for name in ("a", "b", "c"):
            harness.call("PUT", f"/v1/queues/{queue}/schedules/{name}", {"every": 3600, "body": 1})
    monkeypatch.undo()
    assert transitions.repair(harness.ctx, limit=5) == 5  # orders a-c, other a-b
    assert transitions.repair(harness.ctx, limit=5) == 1  # other c: the round is over
    _, doc = harness.call("GET", "/v1/queues/other/messages", params={"status": "pending"})
    assert sorted(m["schedule"] for m in doc["messages"]) == ["a", "b", "c"]
    _, doc = harness.call("GET", "/v1/queues/orders/messages", params={"status": "pending"})
    assert sorted(m["schedule"] for m in doc["messages"]) == ["a", "b", "c"]


def test_the_repair_stores_a_far_occurrence_missing_long_after_the_write_before_it_is_due(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_queue(harness)
    monkeypatch.setattr(harness.ctx.store, "put_occurrence", lambda *_: False)  # as if its chain had broken
    put(harness, "daily", {"every": 86400, "body": 1})
    monkeypatch.undo()
    harness.clock.now += timedelta(hours=1)
    assert transitions.repair(harness.ctx) == 0  # written an hour ago, due in 23: a later round looks
    assert occurrences(harness, "daily") == []
    harness.clock.now += timedelta(hours=22, minutes=50)
    assert transitions.repair(harness.ctx) == 1  # due within the horizon
    assert [m["due_at"] for m in occurrences(harness, "daily", "pending")] == ["2026-11-22T10:00:00.000Z"]
