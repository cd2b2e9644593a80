"""Delivery control end to end through the local runtime with loopback receivers (contract v1.1)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.conftest import Client
from tests.loopback import Answer, CallbackReceiver

# Callbacks answer as each test scripts them (status, headers, a hang).
ScriptedReceiver = CallbackReceiver


@pytest.fixture
def scripted() -> Iterator[ScriptedReceiver]:
    started = ScriptedReceiver().start()
    yield started
    started.stop()


def queue(api: Client, receiver: ScriptedReceiver, path: str, **settings: Any) -> str:
    name = f"dc{uuid.uuid4().hex[:10]}"
    status, doc = api.call(
        "PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": receiver.url(path)}, **settings}
    )
    assert status == 201, doc
    return name


def post(api: Client, name: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    status, doc = api.call("POST", f"/v1/queues/{name}/messages", {"messages": list(messages)})
    assert status == 201, doc
    return list(doc["messages"])


def message(api: Client, name: str, message_id: str) -> dict[str, Any]:
    status, doc = api.call("GET", f"/v1/queues/{name}/messages/{message_id}")
    assert status == 200, doc
    return dict(doc)


def attempts(api: Client, name: str, message_id: str) -> list[dict[str, Any]]:
    status, doc = api.call("GET", f"/v1/queues/{name}/messages/{message_id}/attempts")
    assert status == 200, doc
    return list(doc["attempts"])


def wait_status(api: Client, name: str, message_id: str, wanted: str, timeout: float) -> dict[str, Any]:
    end = time.time() + timeout
    doc = message(api, name, message_id)
    while time.time() < end and doc["status"] != wanted:
        time.sleep(0.2)
        doc = message(api, name, message_id)
    return doc


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_pause_holds_deliveries_and_resume_delivers_them(api: Client, scripted: ScriptedReceiver) -> None:
    name = queue(api, scripted, "/paused")
    status, _ = api.call("POST", f"/v1/queues/{name}/pause")
    created = post(api, name, *({"body": n, "delay": 1 + n} for n in range(3)))
    time.sleep(6)
    held = [message(api, name, c["id"]) for c in created]
    assert status == 200 and scripted.at("/paused") == []
    assert [(d["status"], d["due_at"]) for d in held] == [("pending", c["due_at"]) for c in created]
    resumed = time.time()
    api.call("POST", f"/v1/queues/{name}/resume")
    got = scripted.wait_for("/paused", 3, timeout=20)
    assert sorted(h.body for h in got) == [0, 1, 2] and min(h.at for h in got) >= resumed


@pytest.mark.slow  # waits out the 30 s Retry-After in real time: `make test-slow`
def test_retry_after_beyond_backoff_max_is_waited_out(api: Client, scripted: ScriptedReceiver) -> None:
    scripted.script["/busy"] = [Answer(503, {"Retry-After": "30"})]
    name = queue(api, scripted, "/busy", retry={"max_attempts": 3, "backoff_base": 1, "backoff_max": 2})
    post(api, name, {"body": "x", "delay": 1})
    first, second = scripted.wait_for("/busy", 2, timeout=60)
    assert second.at - first.at >= 30


def test_attempts_list_matches_what_the_receiver_saw(api: Client, scripted: ScriptedReceiver) -> None:
    scripted.script["/flaky"] = [Answer(503), Answer(500)]
    name = queue(api, scripted, "/flaky", retry={"max_attempts": 5, "backoff_base": 0.5, "backoff_max": 1})
    [created] = post(api, name, {"body": "x", "delay": 1})
    wait_status(api, name, created["id"], "delivered", timeout=30)
    history = attempts(api, name, created["id"])
    seen = scripted.at("/flaky")
    assert [(a["attempt"], a["status_code"]) for a in history] == [(i + 1, h.answered) for i, h in enumerate(seen)]
    assert [a["outcome"] for a in history] == ["retry", "retry", "delivered"]
    assert all(
        epoch(a["started_at"]) <= h.at + 0.5 and h.at <= epoch(a["finished_at"]) + 0.5
        for a, h in zip(history, seen, strict=True)
    )


def test_failure_destination_gets_exactly_the_failed_and_expired_ones(api: Client, scripted: ScriptedReceiver) -> None:
    scripted.script["/bad"] = [Answer(500)]
    scripted.script["/late"] = [Answer(503)] * 5
    destination = {"type": "http", "url": scripted.url("/failures")}
    name = queue(api, scripted, "/ok", retry={"max_attempts": 1}, failure_destination=destination)
    ok, bad = post(
        api,
        name,
        {"body": "ok", "delay": 1},
        {"body": "bad", "delay": 1, "target": {"type": "http", "url": scripted.url("/bad")}},
    )
    late_queue = queue(
        api, scripted, "/late", retry={"max_attempts": 5, "backoff_base": 2}, failure_destination=destination
    )
    [late] = post(api, late_queue, {"body": "late", "delay": 1, "ttl": 2.5})
    wait_status(api, name, bad["id"], "failed", timeout=20)
    wait_status(api, late_queue, late["id"], "expired", timeout=20)
    wait_status(api, name, ok["id"], "delivered", timeout=20)
    notices = scripted.wait_for("/failures", 2, timeout=10)
    time.sleep(1)
    got = sorted((h.body["event"], h.body["id"]) for h in scripted.at("/failures"))
    assert len(notices) == 2 and got == sorted([("message.failed", bad["id"]), ("message.expired", late["id"])])


def test_a_receiver_slower_than_the_timeout_is_a_retryable_failure(api: Client, scripted: ScriptedReceiver) -> None:
    scripted.script["/slow"] = [Answer(200, hang=4)]
    name = queue(api, scripted, "/slow", timeout=1, retry={"max_attempts": 3, "backoff_base": 0.5, "backoff_max": 1})
    [created] = post(api, name, {"body": "x", "delay": 1})
    doc = wait_status(api, name, created["id"], "delivered", timeout=30)
    first = attempts(api, name, created["id"])[0]
    took = epoch(first["finished_at"]) - epoch(first["started_at"])
    assert (doc["attempts"], first["outcome"], first["status_code"]) == (2, "retry", None) and took < 2.5
