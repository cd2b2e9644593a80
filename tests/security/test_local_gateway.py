"""The local gateway refuses what a web page could send it, and enforces API Gateway's and Lambda's sizes."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hourglass.handlers import api as api_handler

from devstack import gateway as gateway_module
from devstack.gateway import Gateway
from tests.integration.conftest import Harness

BODY = b'{"messages": [{"body": 1}]}'


@pytest.fixture
def local(harness: Harness) -> Iterator[tuple[Harness, Gateway]]:
    started = Gateway(lambda event, _: api_handler.handle(harness.api, event), 0, lambda: True)
    started.start()
    harness.call("PUT", "/v1/queues/q", {})
    yield harness, started
    started.stop()


def stored(h: Harness) -> int:
    """Items of queue q's partition but its status counters: its queue item and its messages."""
    answer = h.ddb.scan(
        TableName="messages",
        Select="COUNT",
        FilterExpression="pk = :q AND NOT begins_with(sk, :count)",
        ExpressionAttributeValues={":q": {"S": "q"}, ":count": {"S": "#count#"}},
    )
    return int(answer["Count"])


def raw(gw: Gateway, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, Any]:
    """A request with exactly these headers (Host included when given; http.client adds nothing else)."""
    connection = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read()
        return response.status, json.loads(text) if text else None
    finally:
        connection.close()


def post(gw: Gateway, headers: dict[str, str], body: bytes = BODY) -> int:
    base = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    return raw(gw, "POST", "/v1/queues/q/messages", body, {**base, **headers})[0]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}"])
def test_the_runtimes_own_host_names_are_served(local: tuple[Harness, Gateway], host: str) -> None:
    h, gw = local
    assert post(gw, {"Host": host.format(port=gw.port)}) == 201
    assert stored(h) == 2  # queue + message


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1", "127.0.0.1:1", "10.0.0.1:{port}"])
def test_another_host_is_a_403_and_changes_nothing(local: tuple[Harness, Gateway], host: str) -> None:
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends its own Host."""
    h, gw = local
    assert post(gw, {"Host": host.format(port=gw.port)}) == 403
    assert stored(h) == 1


def test_a_get_with_another_host_cannot_read_answers(local: tuple[Harness, Gateway]) -> None:
    _, gw = local
    status, doc = raw(gw, "GET", "/v1/queues/q", None, {"Host": "rebound.example"})
    assert status == 403
    assert "name" not in doc


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1:1", "http://localhost.evil:80"])
def test_an_origin_of_another_site_is_a_403(local: tuple[Harness, Gateway], origin: str) -> None:
    h, gw = local
    assert post(gw, {"Origin": origin}) == 403
    assert stored(h) == 1


def test_the_runtimes_own_origin_is_served(local: tuple[Harness, Gateway]) -> None:
    _, gw = local
    assert post(gw, {"Origin": f"http://localhost:{gw.port}"}) == 201


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_a_body_without_the_json_content_type_is_a_415(
    local: tuple[Harness, Gateway], content_type: str | None
) -> None:
    h, gw = local
    headers = {"Content-Length": str(len(BODY))}
    if content_type:
        headers["Content-Type"] = content_type
    status, doc = raw(gw, "POST", "/v1/queues/q/messages", BODY, headers)
    assert (status, doc["error"]["code"]) == (415, "unsupported_media_type")
    assert stored(h) == 1


def test_json_with_a_charset_is_accepted(local: tuple[Harness, Gateway]) -> None:
    _, gw = local
    assert post(gw, {"Content-Type": "application/json; charset=utf-8"}) == 201


def test_a_bodiless_post_needs_no_content_type(local: tuple[Harness, Gateway]) -> None:
    """Like `/pause` and `/resume`: the API answers (here 404 or 405), the gateway does not refuse it."""
    _, gw = local
    status, _ = raw(gw, "POST", "/v1/queues/q/pause", None, {"Content-Length": "0"})
    assert status not in (415, 403, 400)


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", "+5", "0x10"])
def test_a_negative_or_non_numeric_content_length_is_a_400(local: tuple[Harness, Gateway], length: str) -> None:
    h, gw = local
    assert post(gw, {"Content-Length": length}) == 400
    assert stored(h) == 1


def test_a_response_over_lambdas_limit_is_a_502(
    local: tuple[Harness, Gateway], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, gw = local
    monkeypatch.setattr(gateway_module, "MAX_RESPONSE", 100)
    status, doc = raw(gw, "GET", "/v1/queues/q", None, {})
    assert (status, doc) == (502, {"message": "Internal server error"})


def test_a_request_over_api_gateways_limit_is_a_413(local: tuple[Harness, Gateway]) -> None:
    h, gw = local
    status = post(gw, {"Content-Length": str(gateway_module.MAX_BODY + 1)}, body=b"x" * 1024)
    assert status == 413
    assert stored(h) == 1
