"""Malformed timer-queue messages go to the DLQ after bounded retries and never hold up the rest of a batch.

The DLQ's consumer then logs each one (body and receive count) and acknowledges it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack.emulator import free_port
from tests.faults.callback import Callback
from tests.faults.processes import LocalRuntime

POISON = [
    "not json at all",
    "",
    json.dumps({"q": "orders"}),
    json.dumps({"q": "orders", "id": "x", "v": "one", "due": 1, "sent": 1}),
    json.dumps({"q": "orders", "id": "x", "v": 1, "due": 1, "sent": 1, "more": [["too", "short"]]}),
    json.dumps([1, 2, 3]),
]
MAX_RECEIVE_COUNT = 10  # the stack's redrive policy


@pytest.fixture
def runtime(moto_endpoint: str, tmp_path: Path) -> Iterator[LocalRuntime]:
    # A failed timer is received again after 2 s, so ten receives take seconds, not the stack's hour.
    env = {"HOURGLASS_SWEEP_INTERVAL": "1", "HOURGLASS_LOOKAHEAD": "4", "HOURGLASS_POLL_VISIBILITY": "2"}
    process = LocalRuntime(moto_endpoint, free_port(), tmp_path, env=env)
    yield process.start()
    process.stop()


def queue_urls(sqs: Any) -> tuple[str, str]:
    urls = sqs.list_queues()["QueueUrls"]
    timer = next(u for u in urls if "TimerQueue" in u)
    return timer, next(u for u in urls if "TimerDeadLetterQueue" in u)


def depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(int(attributes[k]) for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"))


@pytest.mark.slow  # ~21 s of a real runtime: `make test-slow` (CI runs it)
def test_poison_timers_end_in_the_dlq_and_the_rest_is_delivered(
    runtime: LocalRuntime, callback: Callback, moto_endpoint: str
) -> None:
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint)
    timer_url, dlq_url = queue_urls(sqs)
    status, _ = runtime.call("PUT", "/v1/queues/poisoned", {"target": {"type": "http", "url": callback.url}})
    assert status == 201
    entries = [{"Id": str(i), "MessageBody": body or " "} for i, body in enumerate(POISON)]
    sqs.send_message_batch(QueueUrl=timer_url, Entries=entries)
    ids: set[str] = set()
    for round_ in range(6):  # valid timers keep arriving while the poison is being retried
        status, doc = runtime.call("POST", "/v1/queues/poisoned/messages", {"messages": [{"body": round_}] * 5})
        ids |= {m["id"] for m in doc["messages"]}
        time.sleep(2)
    missing = callback.wait_until(ids, timeout=45)
    deadline = time.monotonic() + 60
    while len(dead_lettered(runtime)) < len(POISON) and time.monotonic() < deadline:
        time.sleep(0.5)
    dead = dead_lettered(runtime)
    assert missing == set()
    assert sorted(d["body"].strip() for d in dead) == sorted(body for body in POISON)
    assert all(d["receives"] >= MAX_RECEIVE_COUNT for d in dead)
    assert (depth(sqs, timer_url), depth(sqs, dlq_url)) == (0, 0)


def dead_lettered(runtime: LocalRuntime) -> list[dict[str, Any]]:
    """The DLQ consumer's log lines for the poison it took from the DLQ."""
    lines = [line[line.index("{") :] for line in runtime.output().splitlines() if "poison_dead_letter" in line]
    return [json.loads(line) for line in lines]
