"""The local runtime killed (SIGKILL) while an occurrence starts its delivery, before or after the next one is stored.

Occurrence N+1 is stored when N starts its delivery; a runtime that dies in between leaves N
`delivering` and N+1 nowhere. The restarted runtime takes N over when its lease ends, stores N+1
then, and the schedule goes on: no occurrence lost, none delivered twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from devstack.emulator import free_port
from tests.faults.callback import Callback, Request
from tests.faults.clocked import MovableClock
from tests.faults.processes import LocalRuntime
from tests.faults.test_process_kill import FAST

LEAD = timedelta(seconds=3)
# moto's CloudFormation skips resource types it does not model (API Gateway stage, key, usage plan).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


@pytest.fixture
def clock(tmp_path: Path) -> MovableClock:
    return MovableClock(tmp_path / "clock")


@pytest.fixture
def runtime(moto_endpoint: str, tmp_path: Path, clock: MovableClock) -> Iterator[LocalRuntime]:
    env = {**FAST, "HOURGLASS_CLOCK_FILE": str(clock.path)}
    process = LocalRuntime(moto_endpoint, free_port(), tmp_path, env=env, module="tests.faults.clocked")
    yield process
    process.stop()


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def arrivals(callback: Callback, clock: MovableClock, count: int, timeout: float) -> list[tuple[datetime, Request]]:
    """The first `count` requests with the runtime-clock time they arrived at (no jump happens meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(callback.snapshot()) < count:
        time.sleep(0.05)
    offset = timedelta(seconds=clock.offset())
    return [(datetime.fromtimestamp(r.at, UTC) + offset, r) for r in callback.snapshot()]


@pytest.mark.slow  # ~12 s each of a real runtime killed and restarted: `make test-slow` (CI runs it)
@pytest.mark.parametrize("point", ["before_next", "after_next"])
def test_a_kill_while_an_occurrence_starts_loses_none_and_duplicates_none(
    runtime: LocalRuntime, callback: Callback, clock: MovableClock, point: str
) -> None:
    queue = f"crash-{point.replace('_', '-')}"
    runtime.env["HOURGLASS_KILL_CHAIN"] = point
    runtime.start()
    assert runtime.call("PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": callback.url}})[0] == 201
    start = (clock() + timedelta(seconds=4)).replace(microsecond=0)
    schedule = {"every": 60, "start_at": start.isoformat().replace("+00:00", "Z"), "body": {"n": 1}}
    assert runtime.call("PUT", f"/v1/queues/{queue}/schedules/tick", schedule)[0] == 201
    assert runtime.process is not None
    killed = runtime.process.wait(timeout=30)
    del runtime.env["HOURGLASS_KILL_CHAIN"]
    runtime.start()
    seen = arrivals(callback, clock, 1, timeout=30)
    due = [start + timedelta(seconds=60 * k) for k in range(3)]
    for k in (1, 2):
        clock.jump_to(due[k] - LEAD)
        seen = seen[:k] + arrivals(callback, clock, k + 1, timeout=15)[k:]
    expected = [
        *[(r.due_at, "delivered") for _, r in seen],
        ((due[2] + timedelta(seconds=60)).isoformat(timespec="milliseconds").replace("+00:00", "Z"), "pending"),
    ]
    status, stored = listed_by_due(runtime, queue, expected)
    assert (killed, status) == (-9, 200)
    assert [parse(r.due_at) for _, r in seen] == due
    assert len({r.id for _, r in seen}) == 3
    assert [at >= parse(r.due_at) for at, r in seen] == [True] * 3
    assert stored == expected


def listed_by_due(runtime: LocalRuntime, queue: str, expected: list[tuple[str, str]]) -> tuple[int, list[Any]]:
    """The schedule's messages as (due_at, status), once they are `expected` or after 10 s: the third arrival
    reaches the receiver before its outcome is written, and an occurrence handed off when stored chains the
    next one after that outcome."""
    deadline = time.monotonic() + 10
    while True:
        status, listed = runtime.call("GET", f"/v1/queues/{queue}/messages?schedule=tick")
        stored = sorted((m["due_at"], m["status"]) for m in listed.get("messages", []))
        if stored == expected or time.monotonic() > deadline:
            return status, stored
        time.sleep(0.1)
