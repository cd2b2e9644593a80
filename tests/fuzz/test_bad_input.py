"""Hand-picked bad input, in process and through the local gateway: a 4xx naming the field, nothing stored."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from hourglass.handlers import api as api_handler

from devstack.gateway import MAX_BODY, Gateway, proxy_event
from tests.fuzz.conftest import QUEUE, Target

MESSAGES = f"/v1/queues/{QUEUE}/messages"
NESTED = "[" * 100_000 + "]" * 100_000
BAD_BODIES: list[tuple[str, str | bytes]] = [
    ("empty", b""),
    ("not json", b"messages=1"),
    ("truncated", b'{"messages": [{"body": 1}'),
    ("invalid utf-8", b'{"messages": [{"body": "\xff\xfe"}]}'),
    ("lone surrogate", b'{"messages": [{"body": "\\ud800"}]}'),
    ("NaN", b'{"messages": [{"body": 1, "delay": NaN}]}'),
    ("Infinity", b'{"messages": [{"body": 1, "delay": Infinity}]}'),
    ("-Infinity body", b'{"messages": [{"body": -Infinity}]}'),
    ("deeply nested", ('{"messages": [{"body": ' + NESTED + "}]}").encode()),
    ("nested past the limit", ('{"messages": [{"body": ' + "[" * 200 + "]" * 200 + "}]}").encode()),
    ("huge float", b'{"messages": [{"body": 1, "delay": 1e400}]}'),
    ("huge integer", ('{"messages": [{"body": 1, "delay": 1' + "0" * 5000 + "}]}").encode()),
    ("negative delay", b'{"messages": [{"body": 1, "delay": -1}]}'),
    ("delay as string", b'{"messages": [{"body": 1, "delay": "30"}]}'),
    ("delay as bool", b'{"messages": [{"body": 1, "delay": true}]}'),
    ("both delay and deliver_at", b'{"messages": [{"body": 1, "delay": 1, "deliver_at": "2030-01-01T00:00:00Z"}]}'),
    ("no body", b'{"messages": [{"delay": 1}]}'),
    ("unknown field", b'{"messages": [{"body": 1, "colour": 5}]}'),
    ("unknown top-level field", b'{"messages": [{"body": 1}], "extra": 1}'),
    ("not a list", b'{"messages": {"body": 1}}'),
    ("empty batch", b'{"messages": []}'),
    ("batch of 101", json.dumps({"messages": [{"body": i} for i in range(101)]}).encode()),
    ("body over 256 KiB", json.dumps({"messages": [{"body": "x" * (256 * 1024)}]}).encode()),
    ("request over 6 MiB", json.dumps({"messages": [{"body": "x" * 200_000}] * 32}).encode()),
    ("array", b"[1, 2, 3]"),
    ("string", b'"messages"'),
    ("null", b"null"),
    ("far future", b'{"messages": [{"body": 1, "deliver_at": "9999-12-31T23:59:59Z"}]}'),
    ("beyond max_delay", b'{"messages": [{"body": 1, "delay": 400000000}]}'),
    ("no offset", b'{"messages": [{"body": 1, "deliver_at": "2030-01-01T00:00:00"}]}'),
    ("bad offset", b'{"messages": [{"body": 1, "deliver_at": "2030-01-01T00:00:00+25:00"}]}'),
    ("leap second", b'{"messages": [{"body": 1, "deliver_at": "2030-12-31T23:59:60Z"}]}'),
    ("date only", b'{"messages": [{"body": 1, "deliver_at": "2030-01-01"}]}'),
    ("year 10000", b'{"messages": [{"body": 1, "deliver_at": "+10000-01-01T00:00:00Z"}]}'),
    ("ttl zero", b'{"messages": [{"body": 1, "ttl": 0}]}'),
    ("dedup id too long", json.dumps({"messages": [{"body": 1, "dedup_id": "d" * 129}]}).encode()),
    ("target of unknown type", b'{"messages": [{"body": 1, "target": {"type": "ftp", "url": "ftp://x"}}]}'),
    (
        "header injection",
        b'{"messages": [{"body": 1, "target": {"type": "http", "url": "http://127.0.0.1:9/", '
        b'"headers": {"X-A": "1\\r\\nHost: evil"}}}]}',
    ),
    (
        "reserved header",
        b'{"messages": [{"body": 1, "target": {"type": "http", "url": "http://127.0.0.1:9/", '
        b'"headers": {"Hourglass-Signature": "forged"}}}]}',
    ),
    ("one bad among good", json.dumps({"messages": [{"body": 1}] * 50 + [{"body": 1, "delay": -5}]}).encode()),
]
BAD_NAMES = ["a" * 65, "with space", "%C3%BCnic%C3%B6de", "..", "@later", "a%2Fb", "%00", "q;drop"]
BAD_REQUESTS: list[tuple[str, str, str | bytes | None]] = [
    ("PUT", f"/v1/queues/{QUEUE}", b'{"max_delay": 1e999}'),
    ("PUT", f"/v1/queues/{QUEUE}", b'{"default_delay": 10, "max_delay": 5}'),
    ("PUT", f"/v1/queues/{QUEUE}", b'{"retry": {"max_attempts": 0}}'),
    ("PUT", f"/v1/queues/{QUEUE}", b'{"retry": {"max_attempts": 1.5}}'),
    ("PUT", f"/v1/queues/{QUEUE}", b'{"signing_secret": ""}'),
    ("PUT", f"/v1/queues/{QUEUE}", b'{"target": {"type": "sqs"}}'),
    ("PUT", "/v1/queues/new", b'{"ttl": -1}'),
    ("PUT", "/v1/queues/new", b"[]"),
    ("GET", MESSAGES + "?limit=0", None),
    ("GET", MESSAGES + "?limit=99999999999999999999", None),
    ("GET", MESSAGES + "?status=lost", None),
    ("GET", MESSAGES + "?cursor=not-base64!", None),
    ("GET", MESSAGES + "?cursor=eyJwayI6eyJTIjoib3RoZXIifSwic2siOnsiUyI6Im0jMSJ9fQ==", None),
    ("GET", MESSAGES + "?sort=desc", None),
    ("POST", "/create", b'{"topic": "t", "delay": -1, "callback": "http://127.0.0.1:9/", "content": 1}'),
    ("POST", "/create", b'{"topic": "", "callback": "http://127.0.0.1:9/"}'),
    ("POST", "/create", b'{"topic": "t", "retry": 1000, "callback": "http://127.0.0.1:9/"}'),
    ("POST", "/query", b'{"id": 5}'),
    ("POST", "/delete", b"{}"),
]


def call(target: Target, method: str, path: str, body: bytes | None) -> tuple[int, Any]:
    """Through the local gateway's event mapping, as API Gateway would hand the request over."""
    parts = urlsplit(path)
    event = proxy_event(method, path, {"content-type": "application/json"}, body or b"")
    event["queryStringParameters"] = dict(parse_qsl(parts.query)) or None
    response = api_handler.handle(target.harness.api, event)
    return int(response["statusCode"]), json.loads(response["body"]) if response["body"] else None


@pytest.mark.parametrize(("name", "body"), BAD_BODIES, ids=[name for name, _ in BAD_BODIES])
def test_bad_message_requests_are_refused_and_store_nothing(target: Target, name: str, body: bytes) -> None:
    before = target.items()
    status, doc = call(target, "POST", MESSAGES, body)
    assert status in (400, 413), doc
    assert doc["error"]["code"] and doc["error"]["message"]
    assert (target.items(), target.harness.timers()) == (before, [])


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_bad_queue_names_are_refused(target: Target, name: str, method: str) -> None:
    before = target.items()
    status, doc = call(target, method, f"/v1/queues/{name}", b"{}" if method == "PUT" else None)
    posted, _ = call(target, "POST", f"/v1/queues/{name}/messages", b'{"messages": [{"body": 1}]}')
    assert status in (400, 404) and posted in (400, 404), doc
    assert target.items() == before


@pytest.mark.parametrize(("method", "path", "body"), BAD_REQUESTS)
def test_other_bad_requests_are_refused_and_change_nothing(
    target: Target, method: str, path: str, body: bytes | None
) -> None:
    before = target.harness.ddb.scan(TableName="messages")["Items"]
    status, doc = call(target, method, path, body)
    assert status in (400, 404, 413), doc
    assert target.harness.ddb.scan(TableName="messages")["Items"] == before


@pytest.fixture
def gateway(target: Target) -> Iterator[Gateway]:
    started = Gateway(lambda event, _: api_handler.handle(target.harness.api, event), 0, lambda: True)
    started.start()
    yield started
    started.stop()


def send(gateway: Gateway, method: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", gateway.server.server_address[1], timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        return connection.getresponse().status
    finally:
        connection.close()


def test_gateway_refuses_a_body_over_the_api_gateway_limit_unread(target: Target, gateway: Gateway) -> None:
    before = target.items()
    connection = http.client.HTTPConnection("127.0.0.1", gateway.server.server_address[1], timeout=30)
    connection.putrequest("POST", MESSAGES)
    connection.putheader("Content-Length", str(MAX_BODY + 1))
    connection.endheaders(b"x" * 1024)  # the answer comes before the rest of the body is sent
    status = connection.getresponse().status
    connection.close()
    assert (status, target.items()) == (413, before)


@pytest.mark.parametrize(
    "body", [b'{"messages": [{"body": "\xc3\x28"}]}', b"\x00\x01\x02", b'{"messages": [{"body": 1}]}\xff']
)
def test_gateway_passes_invalid_utf8_on_and_the_api_refuses_it(target: Target, gateway: Gateway, body: bytes) -> None:
    before = target.items()
    assert (send(gateway, "POST", MESSAGES, body), target.items()) == (400, before)


def test_gateway_with_a_lying_content_length_does_not_hang_or_store(target: Target, gateway: Gateway) -> None:
    before = target.items()
    status = send(gateway, "POST", MESSAGES, b'{"messages": [{"body": 1}]}', {"Content-Length": "5"})
    assert (status, target.items()) == (400, before)
