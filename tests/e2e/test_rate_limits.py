"""rate_limit and max_concurrency end to end through the local runtime, with loopback receivers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hourglass.core.pacing import pace

from bench.delivery_limits import order_lag, window_ratio
from bench.receiver import Counting
from tests.e2e.conftest import Client, Stack
from tests.e2e.test_delivery_control import epoch

RATE = 20


@pytest.fixture
def counting() -> Iterator[Counting]:
    started = Counting().start()
    yield started
    started.stop()


def limited_queue(api: Client, receiver: Counting, **control: Any) -> str:
    name = f"rl{int(time.time() * 1000) % 10**9}"
    status, doc = api.call("PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": receiver.url()}, **control})
    assert status == 201, doc
    return name


def burst(api: Client, name: str, count: int, lead: float) -> dict[int, float]:
    """`count` messages due 1 ms apart from now + `lead` (body = index); returns index -> due (epoch s)."""
    first = time.time() + lead
    due: dict[int, float] = {}
    for start in range(0, count, 100):
        batch = [
            {"body": i, "deliver_at": datetime.fromtimestamp(first + i / 1000, UTC).isoformat(timespec="milliseconds")}
            for i in range(start, min(count, start + 100))
        ]
        status, doc = api.call("POST", f"/v1/queues/{name}/messages", {"messages": batch})
        assert status == 201, doc
        due.update({start + k: epoch(m["due_at"]) for k, m in enumerate(doc["messages"])})
    return due


def check_burst(api: Client, receiver: Counting, count: int, *, due_order: bool) -> None:
    name = limited_queue(api, receiver, rate_limit=RATE)
    # Lead: the three POSTs of 100 must be stored before the first slot (on a loaded 2-core machine
    # ingest of 100 can take seconds; a timer that beats its item by more than the slot tolerance repaces).
    due = burst(api, name, count, lead=10.0)
    got = receiver.wait_for(count, timeout=count / RATE + 30, settle=0.5)
    bodies = [body for _, body in got]
    assert sorted(bodies) == list(range(count))  # none lost, none twice
    # Due order: slots are handed out in due order and each attempt starts within its slot's window,
    # so a message never starts more than the slot tolerance after a later-due one. That holds while the
    # dispatchers reach every slot in time; the in-process runtime (a dozen pollers' threads in one Python
    # process beside the emulator) misses some, and a missed slot is re-paced at the end of the line
    # (docs/delivery-control.md): there the lag is a timing figure, reported by `make bench`
    # (delivery_limits, "due-order lag"), and not asserted in `make test`.
    if due_order:
        assert order_lag(got) <= pace(RATE).tolerance_us / 1e6
    assert all(at >= due[body] - 0.005 for at, body in got)  # none early (5 ms: float ms rounding)
    assert max(window_ratio([at for at, _ in got], RATE, w) for w in range(1, 11)) <= 1.0


def test_a_burst_of_300_on_a_rate_limited_queue_arrives_within_the_bound(
    api: Client, stack: Stack, counting: Counting
) -> None:
    """~20 s: 300 messages at 20/s take 15 s by definition."""
    check_burst(api, counting, 300, due_order=stack.mode == "deployed")


def test_max_concurrency_3_never_sees_a_4th_request_in_flight(api: Client) -> None:
    receiver = Counting(hold=1.0).start()
    try:
        name = limited_queue(api, receiver, max_concurrency=3)
        due = burst(api, name, 9, lead=2.0)
        got = receiver.wait_for(9, timeout=60, settle=0.5)
    finally:
        receiver.stop()
    assert sorted(body for _, body in got) == sorted(due) and receiver.peak == 3
