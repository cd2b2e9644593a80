"""Client fixtures: the local runtime behind an API key, an SDK client, a raw-body callback receiver."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest
from hourglass_client import Client
from moto.server import ThreadedMotoServer

from devstack.config import RuntimeConfig
from devstack.emulator import free_port, prepare_embedded_moto
from devstack.runtime import Runtime

API_KEY = "client-tests-key"
T = TypeVar("T")


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    raw: bytes


@dataclass
class RawReceiver:
    """A loopback callback server keeping each request's raw body; `script[path]` lists statuses to
    answer before 200."""

    received: list[Delivery] = field(default_factory=list)
    script: dict[str, list[int]] = field(default_factory=dict)
    server: ThreadingHTTPServer | None = None

    def start(self) -> RawReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(Delivery(self.path, dict(self.headers), raw))
                statuses = receiver.script.get(self.path) or []
                self.send_response(statuses.pop(0) if statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def url(self, path: str) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def wait_for(self, path: str, count: int = 1, timeout: float = 30.0) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [d for d in self.received if d.path == path]
            if len(got) >= count:
                return got
            time.sleep(0.05)
        return [d for d in self.received if d.path == path]


def eventually(probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Polls `probe` until it returns something truthy (the runtime delivers in real time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def client_runtime() -> Iterator[Runtime]:
    prepare_embedded_moto()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    assert server._server is not None
    config = RuntimeConfig(
        api_port=0,
        endpoint_url=f"http://127.0.0.1:{server._server.server_port}",
        sweep_interval=1.0,
        lookahead=4.0,
        handoff_safety=1.0,
        allow_private_callbacks=True,
        api_key=API_KEY,
    )
    started = Runtime(config).start()
    yield started
    started.stop()
    server.stop()


@pytest.fixture(scope="session")
def api_url(client_runtime: Runtime) -> str:
    return client_runtime.api_url


@pytest.fixture
def client(api_url: str) -> Client:
    # A 100-message create is 100 dedup transactions on the embedded emulator: on a starved shared
    # machine one request took over the default 30 s, and each retry after a timeout starts over.
    return Client(api_url, API_KEY, timeout=120)


@pytest.fixture(scope="session")
def receiver() -> Iterator[RawReceiver]:
    started = RawReceiver().start()
    yield started
    assert started.server is not None
    started.server.shutdown()


@pytest.fixture
def queue(client: Client, receiver: RawReceiver) -> str:
    """A fresh queue delivering to its own path on the receiver."""
    name = f"q-{uuid.uuid4().hex[:10]}"
    client.put_queue(
        name,
        target={"type": "http", "url": receiver.url(f"/{name}")},
        retry={"max_attempts": 2, "backoff_base": 0.2, "backoff_max": 1},
    )
    return name


@dataclass
class Scripted:
    """A fake API answering each request with the next (status, headers, body) of `answers`."""

    answers: list[tuple[int, dict[str, str], Any]]
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Scripted:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests.append((self.command, self.path, json.loads(raw) if raw else None))
                status, headers, body = fake.answers.pop(0)
                payload = json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def scripted(*answers: tuple[int, dict[str, str], Any]) -> Scripted:
    return Scripted(list(answers)).start()
