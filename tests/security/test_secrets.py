"""Signing secrets are never returned by the API; neither secrets nor payloads reach the logs or metrics."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hourglass.adapters.metrics import Metrics

from tests.integration.conftest import Harness

SECRET = "s3cr3t-signing-value"
TOKEN = "t0ken-in-a-header"
PAYLOAD = "payload-marker-7f3a"
QUEUE = {
    "target": {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": {"X-Token": TOKEN}},
    "signing_secret": SECRET,
    "retry": {"max_attempts": 2},
}


@pytest.fixture
def captured(harness: Harness) -> Iterator[io.StringIO]:
    """Every log line and every metric line the services write."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("hourglass")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    harness.ctx.metrics = Metrics(stream=out, emit=True)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(level)


def texts(h: Harness, *calls: tuple[str, str, Any]) -> str:
    return "".join(repr(h.call(method, path, body)) for method, path, body in calls)


def test_signing_secret_is_never_returned(harness: Harness) -> None:
    answers = texts(
        harness,
        ("PUT", "/v1/queues/q", QUEUE),
        ("PUT", "/v1/queues/q", QUEUE),
        ("GET", "/v1/queues/q", None),
        ("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]}),
        ("GET", "/v1/queues/q/messages", None),
    )
    _, queue = harness.call("GET", "/v1/queues/q")
    assert SECRET not in answers
    assert queue["signing_secret_set"] is True and "signing_secret" not in queue


def test_the_next_signing_secret_is_never_returned(harness: Harness) -> None:
    rolling = {**QUEUE, "signing_secret_next": "n3xt-" + SECRET}
    answers = texts(harness, ("PUT", "/v1/queues/q", rolling), ("GET", "/v1/queues/q", None))
    _, queue = harness.call("GET", "/v1/queues/q")
    assert SECRET not in answers
    assert queue["signing_secret_next_set"] is True and "signing_secret_next" not in queue


def test_a_full_flow_logs_no_secret_no_header_value_and_no_payload(harness: Harness, captured: io.StringIO) -> None:
    harness.receiver.answers = [503, 500, 404]
    harness.call("PUT", "/v1/queues/q", QUEUE)
    body = {"secret-looking": PAYLOAD}
    _, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": body}, {"body": PAYLOAD}] * 2})
    ids = [m["id"] for m in doc["messages"]]
    harness.call("PATCH", f"/v1/queues/q/messages/{ids[3]}", {"body": PAYLOAD, "delay": 5})
    harness.call("DELETE", f"/v1/queues/q/messages/{ids[2]}")
    harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": PAYLOAD, "bogus": PAYLOAD}]})
    harness.call("POST", "/v1/queues/q/messages", f'{{"messages": [{{"body": "{PAYLOAD}"'.encode().decode())
    harness.call("POST", "/create", {"topic": "t", "callback": "http://127.0.0.1:9/", "content": PAYLOAD})
    for _ in range(3):
        harness.dispatch(harness.timers())
        harness.clock.advance(30)
    harness.sweep()
    harness.ctx.metrics.flush()  # what the handlers do at the end of an invocation
    log = captured.getvalue()
    assert len(harness.receiver.requests) >= 4 and '"event":"finished"' in log and '"_aws"' in log
    assert SECRET not in log and TOKEN not in log and PAYLOAD not in log
