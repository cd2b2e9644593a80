"""The integration harness with production's callback checks, and loopback servers that misbehave."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hourglass.adapters import http_target

from devstack.loopback import reply
from tests.conftest import FakeClock
from tests.integration.conftest import Harness, harness_for


@pytest.fixture
def harness(clock: FakeClock) -> Iterator[Harness]:
    with harness_for(clock) as started:
        yield started


@pytest.fixture
def guarded(harness: Harness) -> Harness:
    """Private callbacks refused, URLs checked and calls made by the real HTTP adapter."""
    harness.ctx.settings = replace(harness.ctx.settings, allow_private_callbacks=False)
    harness.ctx.check_url = http_target.check_url
    harness.ctx.post = http_target.post
    return harness


@dataclass
class FakeDns:
    """Stands in for the resolver: names map to the addresses it answers (which may change over time)."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    real: Callable[..., Any] = socket.getaddrinfo

    def __call__(self, host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host in self.answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in self.answers[host]]
        return list(self.real(host, port, *args, **kwargs))


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns()
    monkeypatch.setattr(http_target.socket, "getaddrinfo", fake)
    return fake


@dataclass
class Seen:
    path: str
    host: str


@dataclass
class Server:
    """A loopback HTTP server whose every answer comes from `respond(handler)`."""

    respond: Callable[[BaseHTTPRequestHandler], None]
    seen: list[Seen] = field(default_factory=list)
    httpd: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.httpd is not None
        return int(self.httpd.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], Server]]:
    started: list[Server] = []

    def start(respond: Callable[[BaseHTTPRequestHandler], None]) -> Server:
        server = Server(respond)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.seen.append(Seen(self.path, str(self.headers.get("Host"))))
                try:
                    server.respond(self)
                except OSError:
                    return

            def log_message(self, *args: Any) -> None:
                return

        server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.httpd.daemon_threads = True
        threading.Thread(target=server.httpd.serve_forever, name="loopback", daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        assert server.httpd is not None
        server.httpd.shutdown()
        server.httpd.server_close()


def answer(status: int, body: bytes = b"{}", headers: dict[str, str] | None = None) -> Callable[..., None]:
    def respond(handler: BaseHTTPRequestHandler) -> None:
        reply(handler, status, body, headers)

    return respond


def drip(handler: BaseHTTPRequestHandler) -> None:
    """Answers 200 but sends its body one byte at a time, never finishing."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000000")
    handler.end_headers()
    for _ in range(600):
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(0.1)


def silent(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(30)
