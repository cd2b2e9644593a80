"""End-to-end fixtures: a moto_server, the local runtime deployed into it, a loopback receiver."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from devstack.config import RuntimeConfig
from devstack.emulator import free_port, port_is_free, prepare_embedded_moto
from devstack.runtime import Runtime

LATENESS: list[float] = []


@dataclass
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    """A loopback HTTP callback server; `script[path]` lists the statuses to answer, then 200."""

    received: list[Received] = field(default_factory=list)
    script: dict[str, list[int]] = field(default_factory=dict)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.received.append(Received(time.time(), self.path, dict(self.headers), body))
                statuses = receiver.script.get(self.path) or []
                status = statuses.pop(0) if statuses else 200
                payload = b'{"code": 100}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, path: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = [r for r in self.received if r.path == path]
            if len(got) >= count:
                return got
            time.sleep(0.05)
        return [r for r in self.received if r.path == path]


@dataclass
class Client:
    base: str

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    prepare_embedded_moto()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    assert not port_is_free(port)
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture(scope="session")
def runtime(moto_server: str) -> Iterator[Runtime]:
    config = RuntimeConfig(
        api_port=0,
        endpoint_url=moto_server,
        sweep_interval=1.0,
        lookahead=4.0,
        handoff_safety=1.0,
        allow_private_callbacks=True,
    )
    started = Runtime(config).start()
    yield started
    started.stop()


@pytest.fixture(scope="session")
def api(runtime: Runtime) -> Client:
    return Client(runtime.api_url)


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    assert started.server is not None
    started.server.shutdown()


def record_lateness(seconds: float) -> None:
    LATENESS.append(seconds)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not LATENESS:
        return
    ordered = sorted(LATENESS)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    terminalreporter.write_line(
        f"e2e lateness over {len(ordered)} deliveries: p50 {statistics.median(ordered) * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms, min {ordered[0] * 1000:.0f} ms"
    )
