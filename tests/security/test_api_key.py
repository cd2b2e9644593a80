"""With HOURGLASS_API_KEY set, every route but /health needs the key; a refused request changes nothing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hourglass.handlers import api as api_handler

from devstack.gateway import Gateway
from tests.integration.conftest import Harness

KEY = "k3y-for-tests"
QUEUE = {"target": {"type": "http", "url": "http://127.0.0.1:9/hook"}}


@pytest.fixture
def keyed(harness: Harness) -> tuple[Harness, str]:
    """A queue and a pending message exist; from now on the API wants the key."""
    harness.call("PUT", "/v1/queues/q", QUEUE)
    _, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1, "delay": 600}]})
    harness.timers()
    harness.ctx.settings = replace(harness.ctx.settings, api_key=KEY)
    return harness, doc["messages"][0]["id"]


def requests(message_id: str) -> list[tuple[str, str, Any]]:
    return [
        ("PUT", "/v1/queues/q", {"default_delay": 5}),
        ("PUT", "/v1/queues/other", QUEUE),
        ("GET", "/v1/queues/q", None),
        ("DELETE", "/v1/queues/q", None),
        ("POST", "/v1/queues/q/messages", {"messages": [{"body": 2}]}),
        ("GET", "/v1/queues/q/messages", None),
        ("GET", f"/v1/queues/q/messages/{message_id}", None),
        ("PATCH", f"/v1/queues/q/messages/{message_id}", {"delay": 1}),
        ("DELETE", f"/v1/queues/q/messages/{message_id}", None),
        ("POST", "/create", {"topic": "t", "delay": 1, "callback": "http://127.0.0.1:9/", "content": "c"}),
        ("POST", "/query", {"id": message_id}),
        ("POST", "/delete", {"id": message_id}),
        ("GET", "/no/such/route", None),
    ]


def snapshot(h: Harness) -> list[dict[str, Any]]:
    return sorted(h.ddb.scan(TableName="messages")["Items"], key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def call(h: Harness, method: str, path: str, body: Any, key: str | None) -> int:
    event = {
        "httpMethod": method,
        "path": path,
        "headers": {"content-type": "application/json", **({"X-Api-Key": key} if key is not None else {})},
        "body": None if body is None else json.dumps(body),
    }
    return int(api_handler.handle(h.api, event)["statusCode"])


@pytest.mark.parametrize(("key", "expected"), [(None, 401), ("wrong", 403), ("", 403), (KEY + "x", 403)])
def test_every_route_refuses_a_missing_or_wrong_key_and_changes_nothing(
    keyed: tuple[Harness, str], key: str | None, expected: int
) -> None:
    h, message_id = keyed
    before = snapshot(h)
    answers = {(method, path): call(h, method, path, body, key) for method, path, body in requests(message_id)}
    assert set(answers.values()) == {expected}
    assert (snapshot(h), h.timers(), h.receiver.requests) == (before, [], [])


def test_the_right_key_is_let_in(keyed: tuple[Harness, str]) -> None:
    h, message_id = keyed
    assert call(h, "GET", f"/v1/queues/q/messages/{message_id}", None, KEY) == 200


def test_health_needs_no_key(keyed: tuple[Harness, str]) -> None:
    assert call(keyed[0], "GET", "/health", None, None) == 200


@pytest.fixture
def gateway(keyed: tuple[Harness, str]) -> Iterator[str]:
    h, _ = keyed
    started = Gateway(lambda event, _: api_handler.handle(h.api, event), 0, lambda: True)
    started.start()
    yield started.url
    started.stop()


def http(url: str, headers: dict[str, str]) -> int:
    headers = {"Content-Type": "application/json", **headers}
    request = urllib.request.Request(url, data=b'{"messages":[{"body":1}]}', method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_local_gateway_passes_the_key_header_in_any_case(keyed: tuple[Harness, str], gateway: str) -> None:
    h, _ = keyed
    before = snapshot(h)
    refused = [http(gateway + "/v1/queues/q/messages", headers) for headers in ({}, {"x-api-key": "nope"})]
    accepted = http(gateway + "/v1/queues/q/messages", {"X-API-KEY": KEY})
    assert (refused, accepted) == ([401, 403], 201)
    messages = [item for item in snapshot(h) if item["sk"]["S"].startswith("m#")]
    assert len(messages) == len([item for item in before if item["sk"]["S"].startswith("m#")]) + 1
