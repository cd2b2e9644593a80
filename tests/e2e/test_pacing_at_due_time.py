"""Issue 34's defect, end to end through the local runtime with `make dev`'s timing (a sweep every 60 s, a 300 s
look-ahead, so ingest hands every message here off at once): below their limit, the messages of rate-limited queues
(queue rate, key rate, with concurrency) arrive within the slot tolerance of their due times, whatever order they
were handed off in. Before the calendar of slots, a message handed off first but due later pushed every later
hand-off behind it (docs/delivery-control.md, "Rate limit: pacing at hand-off").

The three runs are posted at once by one fixture, each to its own queues and receiver, and take ~15 s together."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bench.receiver import Counting
from devstack.config import RuntimeConfig
from devstack.runtime import Runtime
from tests.e2e.conftest import API_KEY, Client
from tests.e2e.test_delivery_control import epoch
from tests.e2e.test_rate_limits import limited_queue
from tests.local_stack import embedded_moto

# The slot tolerance below the limit: a start is at most this late after its due time (pacing's tolerance is
# 0.8-0.95 s at the rates here; the rest is the loopback request).
TOLERANCE = 1.0
# A deliver-now's slot is a hand-off lead (1 s) ahead of the call, then the tolerance (the 1.5 s).
DELIVER_NOW_BOUND = 1.5
EARLY = 0.005  # float ms rounding of due times
WAIT = 40.0  # how long a run's receiver waits for all of its messages


@dataclass
class Run:
    """Messages posted to rate-limited queues: the receiver they reach and each body's due time (epoch s)."""

    receiver: Counting
    due: dict[Any, float]

    def lateness(self) -> dict[Any, float]:
        """Each body's arrival after its due time (s), once all arrived; every body exactly once."""
        got = self.receiver.wait_for(len(self.due), timeout=WAIT, settle=0.5)
        assert sorted(str(body) for _, body in got) == sorted(str(body) for body in self.due)
        return {body: round(at - self.due[body], 3) for at, body in got}


@pytest.fixture(scope="module")
def api() -> Iterator[Client]:
    """The runtime as `make dev` runs it (RuntimeConfig's defaults: sweep 60 s, look-ahead 300 s, 4 pollers) on an
    embedded moto server."""
    with embedded_moto() as endpoint:
        runtime = Runtime(RuntimeConfig(api_port=0, endpoint_url=endpoint, api_key=API_KEY))
        try:
            yield Client(runtime.start().api_url, API_KEY)
        finally:
            runtime.stop()


def post_one(api: Client, name: str, body: Any, delay: float, key: str | None = None) -> tuple[str, float]:
    """One message in its own request: its id and due time (epoch s)."""
    message: dict[str, Any] = {"body": body, "delay": delay, **({"flow_key": key} if key else {})}
    status, doc = api.call("POST", f"/v1/queues/{name}/messages", {"messages": [message]})
    assert status == 201, doc
    return doc["messages"][0]["id"], epoch(doc["messages"][0]["due_at"])


def pair(api: Client, receiver: Counting) -> Run:
    """The issue's pair at rate 20 a second, scaled: one due in 12 s, then one due in 3 s (it was 37 s late)."""
    name = limited_queue(api, receiver, rate_limit=20)
    return Run(receiver, {body: post_one(api, name, body, delay)[1] for body, delay in (("later", 12), ("sooner", 3))})


def delivered_now(api: Client, receiver: Counting) -> Run:
    """A message handed off for its slot in 200 s, then delivered now (it was 3 min 13 s late): due at the call."""
    name = limited_queue(api, receiver, rate_limit=20)
    message_id, _ = post_one(api, name, "now", 200)
    asked = time.time()
    status, doc = api.call("POST", f"/v1/queues/{name}/messages/{message_id}/deliver-now")
    assert status == 200, doc
    return Run(receiver, {"now": asked})


def mixed(api: Client, receiver: Counting) -> Run:
    """Six messages on each of two queues, one per request, posted in a shuffled order, due 3-14 s ahead at least
    1 s apart: a key rate of 5 a second with two keys, and a rate of 10 a second with a concurrency of 5."""
    keyed = limited_queue(api, receiver, flow_control={"key_rate_limit": 5})
    limited = limited_queue(api, receiver, rate_limit=10, max_concurrency=5)
    draw = random.Random(34)
    plan = [(keyed, f"{keyed}-{n}", "k1" if n % 2 else "k2") for n in range(6)]
    plan += [(limited, f"{limited}-{n}", None) for n in range(6)]
    draw.shuffle(plan)
    delays = [3 + seconds for seconds in draw.sample(range(12), len(plan))]
    began = time.time()
    due = {}
    for (name, body, key), delay in zip(plan, delays, strict=True):
        due[body] = post_one(api, name, body, delay - (time.time() - began), key)[1]
    return Run(receiver, due)


@pytest.fixture(scope="module")
def runs(api: Client) -> Iterator[dict[str, Run]]:
    receivers = [Counting().start() for _ in range(3)]
    try:
        yield {
            "pair": pair(api, receivers[0]),
            "deliver-now": delivered_now(api, receivers[1]),
            "mixed": mixed(api, receivers[2]),
        }
    finally:
        for receiver in receivers:
            receiver.stop()


def test_a_message_due_sooner_is_not_held_back_by_one_handed_off_before_it(runs: dict[str, Run]) -> None:
    late = runs["pair"].lateness()
    assert all(-EARLY <= seconds <= TOLERANCE for seconds in late.values()), late


def test_deliver_now_on_a_rate_limited_queue_arrives_at_once(runs: dict[str, Run]) -> None:
    late = runs["deliver-now"].lateness()
    assert 0 <= late["now"] <= DELIVER_NOW_BOUND, late


def test_a_mixed_run_in_random_order_arrives_at_its_due_times(runs: dict[str, Run]) -> None:
    late = runs["mixed"].lateness()
    assert all(-EARLY <= seconds <= TOLERANCE for seconds in late.values()), late
