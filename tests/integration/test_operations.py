"""Bulk operations through the API and the worker, on in-process AWS: counts, filters, resume, races."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.core.lifecycle import begin_delivery
from hourglass.errors import StaleVersionError
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
