"""The whole local runtime killed with SIGKILL while the emulator keeps running, then restarted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from devstack.emulator import free_port
from tests.faults.callback import Callback
from tests.faults.processes import LocalRuntime

# Short timings so that what the killed process held comes back within seconds: timers it received
# reappear after the poll visibility, and its delivery leases (half of that) are over by then.
FAST = {
    "HOURGLASS_SWEEP_INTERVAL": "1",
    "HOURGLASS_LOOKAHEAD": "4",
    "HOURGLASS_HANDOFF_SAFETY": "1",
    "HOURGLASS_POLL_VISIBILITY": "6",
}


@pytest.fixture
def runtime(moto_endpoint: str, tmp_path: Path) -> Iterator[LocalRuntime]:
    process = LocalRuntime(moto_endpoint, free_port(), tmp_path, env=FAST)
    yield process.start()
    process.stop()


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


@pytest.mark.slow  # ~13 s of a real runtime killed and restarted: `make test-slow` (CI runs it)
def test_everything_scheduled_before_a_kill_is_delivered_after_the_restart(
    runtime: LocalRuntime, callback: Callback
) -> None:
    status, _ = runtime.call("PUT", "/v1/queues/killed", {"target": {"type": "http", "url": callback.url}})
    assert status == 201
    # handed to the timer queue at ingest, some with a slow first answer so they are mid-delivery at the kill
    soon = [{"body": {"n": i, "hold": 2.0 if i % 3 == 0 else 0}, "delay": 0.5 + i * 0.1} for i in range(30)]
    # still in the due index at the kill: the restarted sweeper hands them off
    later = [{"body": {"n": 100 + i}, "delay": 9 + i * 0.2} for i in range(20)]
    status, doc = runtime.call("POST", "/v1/queues/killed/messages", {"messages": soon + later})
    assert status == 201
    due = {m["id"]: epoch(m["due_at"]) for m in doc["messages"]}
    time.sleep(2.5)
    runtime.kill()
    killed_at = time.time()
    at_kill = callback.snapshot()
    runtime.start()
    missing = callback.wait_until(set(due), timeout=60)
    statuses = {runtime.call("GET", f"/v1/queues/killed/messages/{i}")[1]["status"] for i in due}
    requests = callback.snapshot()
    early = [r for r in requests if r.at < due[r.id]]
    cut_off = {r.id for r in at_kill} & {r.id for r in requests if r.at > killed_at and r.attempt > 1}
    assert 0 < len(at_kill) < len(due), "the kill must land mid-run"
    assert cut_off, "some deliveries must have been under way at the kill"
    assert (missing, early, statuses) == (set(), [], {"delivered"})
