"""Schedules through the local runtime (moto server, pollers, sweeper) on a clock the test moves forward.

The clock runs at real speed; between occurrences the test jumps it to a few seconds before the next
one, so a schedule of minutes or of a night's daylight-saving change runs in seconds, through the
real hand-off, sweep and SQS delays.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.adapters.store import Store
from hourglass.core import schedule
from hourglass.core.sweep_state import SweepState
from hourglass.core.timestamps import to_ms

from tests.e2e.conftest import API_KEY, Client, Receiver
from tests.faults.clocked import ClockedRuntime, MovableClock
from tests.local_stack import embedded_moto, short_timing
from tests.loopback import Received

# Jumps land this far before an occurrence: past the sweep interval + hand-off safety, inside the lookahead.
LEAD = timedelta(seconds=3)
# ... after a first jump this far before it, where the sweeper catches up on the minutes jumped over.
CATCH_UP = timedelta(seconds=120)
# An occurrence counts as on time within this of its due time (the runtime's sweep runs every second).
ON_TIME = timedelta(seconds=1.5)
# Where the runtime's clock starts: shortly before the clocks go back in London (01:00 UTC on 31 October 2027).
EPOCH = datetime(2027, 10, 31, 0, 55, tzinfo=UTC)


@dataclass(frozen=True)
class Clocked:
    api: Client
    clock: MovableClock
    receiver: Receiver
    store: Store
    created: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def clocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clocked]:
    clock = MovableClock(tmp_path_factory.mktemp("clock") / "offset")
    # Set before the first sweep, which starts its watermark from the clock: no hours of buckets to catch up.
    clock.jump_to(EPOCH)
    receiver = Receiver(clock=lambda: clock().timestamp()).start()
    with embedded_moto() as endpoint:
        runtime = ClockedRuntime(short_timing(endpoint, API_KEY))
        runtime.clock = clock
        try:
            runtime.start()
            assert runtime.context is not None
            yield Clocked(Client(runtime.api_url, API_KEY), clock, receiver, runtime.context.store)
        finally:
            runtime.stop()
            receiver.stop()


@pytest.fixture(autouse=True)
def delete_schedules(clocked: Clocked) -> Iterator[None]:
    """A test's schedules end with it: later jumps of the clock would make them catch up on missed occurrences."""
    yield
    while clocked.created:
        name = clocked.created.pop()
        clocked.api.call("DELETE", f"/v1/queues/{name}/schedules/{name}")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def received_at(hit: Received) -> datetime:
    return datetime.fromtimestamp(hit.at, UTC)


def new_schedule(c: Clocked, name: str, rule: Mapping[str, object], start_at: datetime | None = None) -> str:
    """A queue of its own and the schedule in it; returns the receiver path its occurrences arrive on."""
    path = f"/{name}"
    status, _ = c.api.call("PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": c.receiver.url(path)}})
    assert status == 201
    doc = {**rule, "body": {"schedule": name}}
    if start_at is not None:
        doc["start_at"] = start_at.isoformat().replace("+00:00", "Z")
    status, created = c.api.call("PUT", f"/v1/queues/{name}/schedules/{name}", doc)
    assert status == 201, created
    c.created.append(name)
    return path


def settle(c: Clocked, at: datetime) -> None:
    """Wait until the sweeper has read the due index up to `at`, in its main and recovery windows."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = c.store.load_sweep_state(SweepState(0, 0))
        if state.watermark >= to_ms(at) and state.recovery_watermark >= schedule.recovery_sweep_end(at):
            return
        time.sleep(0.1)
    raise AssertionError(f"the sweeper did not catch up to {at.isoformat()} within 60 s")


def deliver(c: Clocked, path: str, due: datetime, count: int) -> list[Received]:
    """Jump to just before `due`, then wait for the `count`th delivery on `path` (or 15 s).

    The jump is made in two steps, so that the lateness measured is the runtime's and not the time
    its sweeper needs to read the buckets of the minutes (or hours) jumped over.
    """
    if c.clock() < due - CATCH_UP:
        c.clock.jump_to(due - CATCH_UP)
        settle(c, due - CATCH_UP)
    assert c.clock() < due - LEAD, "the sweeper took longer than CATCH_UP to catch up"
    c.clock.jump_to(due - LEAD)
    return c.receiver.wait_for(path, count, timeout=15)


def quiet(c: Clocked, path: str, until: datetime, seen: int) -> list[Received]:
    """Jump to `until`, let the sweeper read up to it, then what arrived beyond the `seen` first."""
    c.clock.jump_to(until)
    settle(c, until)
    time.sleep(2)
    return c.receiver.wait_for(path, seen + 1, timeout=0)[seen:]


def lateness(hits: list[Received], due: list[datetime]) -> list[float]:
    return [(received_at(h) - d).total_seconds() for h, d in zip(hits, due, strict=True)]


def test_cron_across_the_london_autumn_change_skips_the_repeated_hour(clocked: Clocked) -> None:
    """`* 0-2 * * *` in London from 01:58 BST on 31 October 2027: the clocks go back at 02:00 BST (01:00 UTC).

    01:58 and 01:59 BST arrive on time; the repeated 01:00-01:59 (GMT) does not fire again, so the
    occurrence stored next is 02:00 GMT. (First in the module: the clock only moves forward.)
    """
    start = datetime(2027, 10, 31, 0, 58, tzinfo=UTC)
    rule = {"cron": "* 0-2 * * *", "timezone": "Europe/London"}
    path = new_schedule(clocked, "london-night", rule, start_at=start)
    due = [start, start + timedelta(minutes=1)]
    for k, at in enumerate(due):
        assert len(deliver(clocked, path, at, k + 1)) == k + 1, f"occurrence {at} did not arrive"
    hits = clocked.receiver.wait_for(path, 2, timeout=0)
    late = lateness(hits, due)
    listed = clocked.api.call("GET", "/v1/queues/london-night/messages?schedule=london-night&status=pending")[1]
    doc = clocked.api.call("GET", "/v1/queues/london-night/schedules/london-night")[1]
    after = datetime(2027, 10, 31, 2, 0, tzinfo=UTC)
    assert [parse(h.headers["Hourglass-Due-At"]) for h in hits] == due
    assert min(late) >= 0 and max(late) < ON_TIME.total_seconds(), late
    assert [parse(m["due_at"]) for m in listed["messages"]] == [after]
    assert [parse(t) for t in doc["next_due_at"]] == [after + timedelta(minutes=k) for k in range(3)]


def test_every_minute_occurrences_arrive_once_each_on_time(clocked: Clocked) -> None:
    start = (clocked.clock() + timedelta(seconds=30)).replace(microsecond=0)
    path = new_schedule(clocked, "every-minute", {"every": 60}, start_at=start)
    due = [start + timedelta(seconds=60 * k) for k in range(3)]
    for k, at in enumerate(due):
        deliver(clocked, path, at, k + 1)
    hits = clocked.receiver.wait_for(path, 3, timeout=0)
    late = lateness(hits, due)
    assert [parse(h.headers["Hourglass-Due-At"]) for h in hits] == due
    assert {h.headers["Hourglass-Schedule"] for h in hits} == {"every-minute"}
    assert len({h.headers["Hourglass-Message-Id"] for h in hits}) == 3
    assert min(late) >= 0 and max(late) < ON_TIME.total_seconds(), late


def test_pause_skips_occurrences_and_resume_continues_after_now(clocked: Clocked) -> None:
    start = (clocked.clock() + timedelta(seconds=30)).replace(microsecond=0)
    path = new_schedule(clocked, "paused", {"every": 60}, start_at=start)
    assert len(deliver(clocked, path, start, 1)) == 1
    status, doc = clocked.api.call("POST", "/v1/queues/paused/schedules/paused/pause")
    assert (status, doc["paused"], doc["next_due_at"]) == (200, True, [])
    skipped = quiet(clocked, path, start + timedelta(seconds=150), 1)
    status, doc = clocked.api.call("POST", "/v1/queues/paused/schedules/paused/resume")
    assert (status, doc["paused"]) == (200, False)
    resumed = start + timedelta(seconds=180)
    assert parse(doc["next_due_at"][0]) == resumed
    hits = deliver(clocked, path, resumed, 2)
    assert skipped == []
    assert [parse(h.headers["Hourglass-Due-At"]) for h in hits] == [start, resumed]
    assert received_at(hits[1]) >= resumed


def test_delete_cancels_the_pending_occurrence(clocked: Clocked) -> None:
    start = (clocked.clock() + timedelta(seconds=30)).replace(microsecond=0)
    path = new_schedule(clocked, "deleted", {"every": 60}, start_at=start)
    assert len(deliver(clocked, path, start, 1)) == 1
    listed = clocked.api.call("GET", "/v1/queues/deleted/messages?schedule=deleted&status=pending")[1]
    (pending,) = listed["messages"]
    assert clocked.api.call("DELETE", "/v1/queues/deleted/schedules/deleted")[0] == 204
    after = quiet(clocked, path, start + timedelta(seconds=130), 1)
    message = clocked.api.call("GET", f"/v1/queues/deleted/messages/{pending['id']}")[1]
    assert (after, message["status"], parse(pending["due_at"])) == ([], "cancelled", start + timedelta(seconds=60))
