"""Ordered delivery per key (v1.3) end to end: a slow head keeps its key's next message waiting, which starts as soon
as it ends; keys side by side; a failure holds a key until it is released. Real time, so outside `make test`:
`make test-realtime` through the local runtime, `make test-deployed` as deployed (tests/integration/test_ordering.py
covers the same cases on a fixed clock within `make test`)."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.receiver import Counting
from tests.e2e.conftest import MODES, Client

pytestmark = pytest.mark.skipif(
    "deployed" not in MODES and os.environ.get("HOURGLASS_E2E_REALTIME") != "1",
    reason="real-time runs: make test-deployed / make test-realtime",
)
HOLD_S = 1.0


def at(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds_from_now, UTC).isoformat(timespec="milliseconds")


def ordered_queue(api: Client, url: str, on_failure: str = "continue", **settings: Any) -> str:
    name = f"ord{int(time.time() * 1000) % 10**9}"
    doc = {"target": {"type": "http", "url": url}, "ordering": {"by": "flow_key", "on_failure": on_failure}}
    status, got = api.call("PUT", f"/v1/queues/{name}", {**doc, **settings})
    assert status == 201, got
    return name


def post(api: Client, name: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    status, doc = api.call("POST", f"/v1/queues/{name}/messages", {"messages": messages})
    assert status == 201, doc
    return list(doc["messages"])


def test_a_slow_head_keeps_its_key_one_at_a_time_in_due_order(api: Client) -> None:
    """~10 s: two keys of 4 messages each, due 50 ms apart, each request held 1 s: per key one in flight, in due
    order, the next starting soon after the one before ended; the keys side by side."""
    receivers = {k: Counting(hold=HOLD_S).start() for k in "ab"}
    try:
        _run_slow_heads(api, receivers)
    finally:
        for receiver in receivers.values():
            receiver.stop()


def _run_slow_heads(api: Client, receivers: dict[str, Counting]) -> None:
    name = ordered_queue(api, receivers["a"].url())
    messages = [
        {"body": {"k": k, "i": i}, "flow_key": k, "deliver_at": at(3 + i * 0.05), "target": _target(receivers[k])}
        for i in range(4)
        for k in "ab"
    ]
    post(api, name, messages)
    got = {k: receiver.wait_for(4, timeout=60, settle=0.5) for k, receiver in receivers.items()}
    for k, arrivals in got.items():
        assert [body["i"] for _, body in arrivals] == [0, 1, 2, 3], k
        assert receivers[k].peak == 1
        gaps = [later - (earlier + HOLD_S) for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
        assert max(gaps) < 1.0, gaps
    assert abs(got["a"][0][0] - got["b"][0][0]) < 1.0


# "k/1" percent-encoded in the path; "" (messages without a flow key) is an empty segment: `keys/`, `keys//release`.
@pytest.mark.parametrize(("flow_key", "segment"), [("k/1", "k%2F1"), ("", "")])
def test_a_failure_holds_the_key_until_it_is_released(
    api: Client, counting: Counting, flow_key: str, segment: str
) -> None:
    name = ordered_queue(api, counting.url(), on_failure="hold", retry={"max_attempts": 1})
    refused = {"type": "http", "url": "http://127.0.0.1:9/refused"}
    keyed = {"flow_key": flow_key} if flow_key else {}
    first, second = post(
        api,
        name,
        [
            {"body": {"i": 0}, **keyed, "deliver_at": at(2), "target": refused},
            {"body": {"i": 1}, **keyed, "deliver_at": at(2.05)},
        ],
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        status, key = api.call("GET", f"/v1/queues/{name}/keys/{segment}")
        if status == 200 and key["held"]:
            break
        time.sleep(0.5)
    assert key == {"flow_key": flow_key, "head": first["id"], "waiting": 1, "held": True}
    _, doc = api.call("GET", f"/v1/queues/{name}/messages/{second['id']}")
    assert (doc["status"], doc["blocked_by"]) == ("pending", first["id"])
    status, _ = api.call("POST", f"/v1/queues/{name}/keys/{segment}/release")
    assert status == 200
    got = counting.wait_for(1, timeout=30, settle=0.5)
    assert [body for _, body in got] == [{"i": 1}]


def _target(receiver: Counting) -> dict[str, str]:
    return {"type": "http", "url": receiver.url()}


@pytest.fixture
def counting() -> Iterator[Counting]:
    started = Counting().start()
    yield started
    started.stop()
