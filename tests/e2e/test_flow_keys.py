"""Flow control per key and priority (v1.2) end to end: each key's rate and concurrency kept beside the
queue's, keys isolated, and priority among held-back messages. Real time, so outside `make test`:
`make test-realtime` through the local runtime, `make test-deployed` as deployed (tests/integration/test_flow_keys.py
covers the same cases on a fixed clock within `make test`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.delivery_limits import window_ratio
from bench.receiver import Counting
from tests.e2e.conftest import MODES, Client
from tests.e2e.test_rate_limits import limited_queue

# Real-time runs: `make test-deployed` as deployed, `make test-realtime` through the local runtime.
pytestmark = pytest.mark.skipif(
    "deployed" not in MODES and os.environ.get("HOURGLASS_E2E_REALTIME") != "1",
    reason="real-time runs: make test-deployed / make test-realtime",
)
WINDOWS = (1, 2, 5, 10)


@pytest.fixture
def counting() -> Iterator[Counting]:
    started = Counting().start()
    yield started
    started.stop()


def at(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds_from_now, UTC).isoformat(timespec="milliseconds")


def post(api: Client, name: str, messages: list[dict[str, Any]]) -> None:
    for first in range(0, len(messages), 100):
        status, doc = api.call("POST", f"/v1/queues/{name}/messages", {"messages": messages[first : first + 100]})
        assert status == 201, doc


def keyed(got: list[tuple[float, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for arrived, body in got:
        out.setdefault(body["k"], []).append(arrived)
    return out


def worst(starts: list[float], rate: float) -> float:
    return max(window_ratio(starts, rate, window) for window in WINDOWS)


def test_two_keys_at_2_a_second_keep_their_bound_and_finish_together(api: Client, counting: Counting) -> None:
    """~15 s: 20 messages of each key due at once; each key drains at 2/s, side by side."""
    name = limited_queue(api, counting, flow_control={"key_rate_limit": 2})
    due = at(5.0)
    post(api, name, [{"body": {"k": k, "i": i}, "flow_key": k, "deliver_at": due} for k in "ab" for i in range(20)])
    by_key = keyed(counting.wait_for(40, timeout=60, settle=0.5))
    assert (len(by_key["a"]), len(by_key["b"])) == (20, 20)
    assert (worst(by_key["a"], 2), worst(by_key["b"], 2)) <= (1.0, 1.0)
    assert abs(max(by_key["a"]) - max(by_key["b"])) <= 2.0


def test_the_queue_rate_and_the_key_rate_hold_together(api: Client, counting: Counting) -> None:
    name = limited_queue(api, counting, rate_limit=3, flow_control={"key_rate_limit": 2})
    due = at(5.0)
    post(api, name, [{"body": {"k": k, "i": i}, "flow_key": k, "deliver_at": due} for k in "abc" for i in range(8)])
    got = counting.wait_for(24, timeout=60, settle=0.5)
    assert len(got) == 24 and worst([a for a, _ in got], 3) <= 1.0
    assert max(worst(starts, 2) for starts in keyed(got).values()) <= 1.0


def test_key_max_concurrency_1_holds_one_request_per_key(api: Client) -> None:
    """A receiver per key, each holding every request 1 s: at most one in flight at each."""
    receivers = {k: Counting(hold=1.0).start() for k in "ab"}
    try:
        name = limited_queue(api, receivers["a"], flow_control={"key_max_concurrency": 1})
        post(
            api,
            name,
            [
                {"body": {"k": k, "i": i}, "flow_key": k, "target": {"type": "http", "url": receivers[k].url()}}
                for k in "ab"
                for i in range(4)
            ],
        )
        got = {k: receiver.wait_for(4, timeout=60, settle=0.5) for k, receiver in receivers.items()}
    finally:
        for receiver in receivers.values():
            receiver.stop()
    assert {k: len(v) for k, v in got.items()} == {"a": 4, "b": 4}
    assert {k: r.peak for k, r in receivers.items()} == {"a": 1, "b": 1}


@pytest.mark.parametrize(
    "control",
    [{"rate_limit": 1}, {"flow_control": {"key_rate_limit": 1, "key_max_concurrency": 1}}],
    ids=["queue-rate", "key-rate-and-concurrency"],
)
def test_high_priority_posted_after_a_backlog_starts_next(
    api: Client, counting: Counting, control: dict[str, Any]
) -> None:
    """10 low, then 3 high, all due now at rate 1 (slots 1.25 s apart; one key, in flight one at a time in the
    second case): the high ones take the low ones' slots beyond the give-way margin (4 s, at most 4 slots at this
    rate), so at most 4 low start first."""
    name = limited_queue(api, counting, **control)
    post(api, name, [{"body": {"k": "low", "i": i}, "priority": 1, "flow_key": "t"} for i in range(10)])
    post(api, name, [{"body": {"k": "high", "i": i}, "priority": 9, "flow_key": "t"} for i in range(3)])
    got = counting.wait_for(13, timeout=40, settle=0.5)
    order = [body["k"] for _, body in got]
    last_high = max(i for i, k in enumerate(order) if k == "high")
    assert len(got) == 13 and order[:last_high].count("low") <= 4, order
