"""Bulk operations through the API and the worker, on in-process AWS: counts, filters, resume, races."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.adapters.operation_storage import OperationStorage
from hourglass.core.lifecycle import begin_delivery
from hourglass.core.operations import WORKER_LEASE
from hourglass.core.timestamps import format_rfc3339
from hourglass.errors import StaleVersionError
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import operations as operations_module
from hourglass.service.operations import Operations

from tests.integration.conftest import Harness

TARGET = {"type": "http", "url": "http://127.0.0.1:9/"}


@pytest.fixture
def queue(harness: Harness) -> str:
    harness.call("PUT", "/v1/queues/ops", {"target": TARGET})
    return "ops"


def send(harness: Harness, queue: str, delays: list[int]) -> list[str]:
    ids: list[str] = []
    for first in range(0, len(delays), 100):
        batch = [{"body": i, "delay": d} for i, d in enumerate(delays[first : first + 100])]
        status, doc = harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": batch})
        assert status == 201
        ids += [m["id"] for m in doc["messages"]]
    return ids


def status_of(harness: Harness, queue: str, message_id: str) -> str:
    return str(harness.call("GET", f"/v1/queues/{queue}/messages/{message_id}")[1]["status"])


def test_cancel_with_due_filter_changes_only_matching_messages(harness: Harness, queue: str) -> None:
    early = send(harness, queue, [600] * 5)
    late = send(harness, queue, [7200] * 3)
    before = (harness.clock.now + timedelta(hours=1)).isoformat()
    status, started = harness.call(
        "POST", f"/v1/queues/{queue}/operations", {"action": "cancel", "filter": {"due_before": before}}
    )
    assert status == 202
    _, done = harness.call("GET", f"/v1/queues/{queue}/operations/{started['id']}")
    assert (done["status"], done["matched"], done["applied"], done["skipped"]) == ("succeeded", 5, 5, 0)
    assert {status_of(harness, queue, i) for i in early} == {"cancelled"}
    assert {status_of(harness, queue, i) for i in late} == {"pending"}


def test_shift_moves_due_times_and_never_before_now(harness: Harness, queue: str) -> None:
    (later,) = send(harness, queue, [600])
    (soon,) = send(harness, queue, [30])
    harness.call("POST", f"/v1/queues/{queue}/operations", {"action": "shift", "seconds": -300})
    now = harness.clock.now
    later_due = harness.call("GET", f"/v1/queues/{queue}/messages/{later}")[1]["due_at"]
    soon_due = harness.call("GET", f"/v1/queues/{queue}/messages/{soon}")[1]["due_at"]
    assert later_due.startswith((now + timedelta(seconds=300)).strftime("%Y-%m-%dT%H:%M:%S"))
    assert soon_due.startswith(now.strftime("%Y-%m-%dT%H:%M:%S"))


def test_bad_request_is_a_400_naming_the_field(harness: Harness, queue: str) -> None:
    status, doc = harness.call("POST", f"/v1/queues/{queue}/operations", {"action": "shift"})
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "seconds")
    status, doc = harness.call(
        "POST", f"/v1/queues/{queue}/operations", {"action": "cancel", "filter": {"status": "failed"}}
    )
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "filter.status")


def test_unknown_operation_is_404(harness: Harness, queue: str) -> None:
    assert harness.call("GET", f"/v1/queues/{queue}/operations/0123456789abcdef0123456789abcdef")[0] == 404


def test_worker_out_of_time_resumes_from_its_cursors_and_counts_each_message_once(
    harness: Harness, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = send(harness, queue, [600] * 60)
    monkeypatch.setattr(operations_module, "PAGE", 2)
    invoked: list[dict[str, Any]] = []
    ops = Operations(harness.ctx, invoke=invoked.append)
    started = ops.start(queue, {"action": "cancel"})
    budget = iter([100.0] * 10 + [0.0] * 1000)
    left: list[int] = []
    for event in list(invoked):
        left += ops.work(event, lambda: next(budget))  # runs out of time after a few pages
    assert left
    assert ops.get(queue, started.id).status.value == "running"
    for event in invoked[4:]:  # the re-invocations the short workers queued
        ops.work(event, lambda: 100.0)
    done = ops.get(queue, started.id)
    assert (done.status.value, done.progress.matched, done.progress.applied) == ("succeeded", 60, 60)
    assert {status_of(harness, queue, i) for i in ids} == {"cancelled"}


def test_a_message_the_operation_cancelled_cannot_begin_delivery(harness: Harness, queue: str) -> None:
    (message_id,) = send(harness, queue, [600])
    version = harness.ctx.store.get_message(queue, message_id).version  # type: ignore[union-attr]
    harness.call("POST", f"/v1/queues/{queue}/operations", {"action": "cancel"})
    with pytest.raises(StaleVersionError):
        harness.ctx.store.begin_delivery(
            queue, message_id, begin_delivery(version, harness.clock.now, timedelta(seconds=60))
        )
    assert status_of(harness, queue, message_id) == "cancelled"


class WorkerCrash(Exception):
    """Stands in for a worker that dies (process killed, Lambda timeout) in the middle of a page."""


def crash_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """The worker's message writes fail from the `writes`-th on, as if its process died there."""
    real = Operations._write
    done = iter(range(writes))

    def dying(self: Operations, *args: Any) -> Any:
        if next(done, None) is None:
            raise WorkerCrash
        return real(self, *args)

    monkeypatch.setattr(Operations, "_write", dying)


def due_of(harness: Harness, queue: str, message_id: str) -> str:
    return str(harness.call("GET", f"/v1/queues/{queue}/messages/{message_id}")[1]["due_at"])


def test_a_dead_worker_is_restarted_by_the_scheduled_sweep_and_shifts_each_message_once(
    harness: Harness, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = send(harness, queue, [600] * 60)
    expected = format_rfc3339(harness.clock.now + timedelta(seconds=600 + 3600))
    monkeypatch.setattr(operations_module, "PAGE", 3)
    invoked: list[dict[str, Any]] = []
    ops = Operations(harness.ctx, invoke=invoked.append)
    started = ops.start(queue, {"action": "shift", "seconds": 3600})
    crash_after(monkeypatch, 7)
    with pytest.raises(WorkerCrash):
        ops.work(invoked[0], lambda: 100.0)
    monkeypatch.undo()
    monkeypatch.setattr(operations_module, "PAGE", 3)
    for event in invoked[1:4]:
        ops.work(event, lambda: 100.0)
    assert sweeper_handler.handle(harness.ctx, {}, None)["operations_restarted"] == []  # still within its lease
    harness.clock.advance(WORKER_LEASE.total_seconds() + 1)
    assert sweeper_handler.handle(harness.ctx, {}, None)["operations_restarted"] == [started.id]
    done = ops.get(queue, started.id)
    assert (done.status.value, done.progress.matched, done.progress.applied, done.progress.skipped) == (
        "succeeded",
        60,
        60,
        0,
    )
    assert {due_of(harness, queue, i) for i in ids} == {expected}


def test_two_sweepers_that_find_the_same_dead_worker_restart_it_once(
    harness: Harness, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    send(harness, queue, [600] * 10)
    invoked: list[dict[str, Any]] = []
    started = Operations(harness.ctx, invoke=invoked.append).start(queue, {"action": "cancel"})
    harness.clock.advance(WORKER_LEASE.total_seconds() + 1)
    relaunched: list[dict[str, Any]] = []
    first = Operations(harness.ctx, invoke=relaunched.append).restart_stale()
    second = Operations(harness.ctx, invoke=relaunched.append).restart_stale()
    assert (first, second) == ([started.id], [])
    assert sorted(seg for event in relaunched for seg in event["segments"]) == list(range(16))


def test_an_operation_whose_worker_died_after_its_last_page_is_finished_by_the_restart(
    harness: Harness, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    send(harness, queue, [600] * 10)
    monkeypatch.setattr(OperationStorage, "finish_if_done", lambda *args, **kwargs: None)  # dies before it
    ops = Operations(harness.ctx)
    started = ops.start(queue, {"action": "cancel"})
    assert ops.get(queue, started.id).status.value == "running"
    monkeypatch.undo()
    assert ops.restart_stale() == []
    done = ops.get(queue, started.id)
    assert (done.status.value, done.progress.applied) == ("succeeded", 10)
    assert harness.ctx.store.running_operations() == []
