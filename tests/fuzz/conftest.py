"""The REST API in process for fuzzers: the integration harness behind a WSGI shim built on the local gateway's
event mapping, with a queue and messages to aim at."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from hourglass.handlers import api as api_handler
from hypothesis import Phase, settings

from devstack.gateway import proxy_event
from tests.conftest import FakeClock
from tests.integration.conftest import Harness, harness_for

QUEUE = "fuzzed"
# `pytest --hypothesis-profile=no-shrink`: the first failing example as found (shrinking large bodies is slow).
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


@dataclass
class Target:
    """What the fuzzers aim at: the harness, a queue that exists and messages in it."""

    harness: Harness
    message_ids: list[str]

    def items(self) -> int:
        return int(self.harness.ddb.scan(TableName="messages", Select="COUNT")["Count"])

    def wsgi(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = environ["CONTENT_TYPE"]
        # PATH_INFO arrives decoded (as latin-1); the gateway event wants the raw, quoted path
        path = quote(environ.get("PATH_INFO", "/").encode("latin-1"), safe="/")
        query = environ.get("QUERY_STRING")
        event = proxy_event(environ["REQUEST_METHOD"], path + (f"?{query}" if query else ""), headers, body)
        response = api_handler.handle(self.harness.api, event)
        start_response(f"{response['statusCode']} -", list((response.get("headers") or {}).items()))
        return [(response.get("body") or "").encode()]


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    """Shared by a module's tests: a refused request changes nothing, which each test checks."""
    with harness_for(FakeClock()) as harness:
        status, _ = harness.call(
            "PUT", f"/v1/queues/{QUEUE}", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}}
        )
        assert status == 201
        _, doc = harness.call(
            "POST", f"/v1/queues/{QUEUE}/messages", {"messages": [{"body": i, "delay": 60 * i} for i in range(1, 4)]}
        )
        harness.timers()  # their hand-off timers: what a test leaves in the timer queue is then its own
        yield Target(harness, [m["id"] for m in doc["messages"]])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts = [
        getattr(sys.modules.get(f"tests.fuzz.{name}"), "CASES", None) for name in ("test_openapi", "test_validation")
    ]
    openapi, api = (c or {} for c in counts)
    if openapi or api:
        terminalreporter.write_line(
            f"fuzz: {openapi.get('cases', 0)} schemathesis cases ({openapi.get('server_errors', 0)} answered 5xx), "
            f"{api.get('cases', 0)} hypothesis API cases"
        )
    delivered = getattr(sys.modules.get("tests.fuzz.test_through_delivery"), "COUNTS", None)
    if delivered:
        terminalreporter.write_line(
            "fuzz through delivery: " + ", ".join(f"{k} {v}" for k, v in sorted(delivered.items()))
        )
