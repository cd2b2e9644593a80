"""Loopback HTTP servers for tests: serving a handler on a free port, and a callback receiver that keeps
every request and answers as scripted."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from devstack.loopback import QuietHandler, base_url, serve, shut


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0


@dataclass(frozen=True)
class Received:
    at: float
    path: str
    headers: dict[str, str]
    raw: bytes
    answered: int = 200

    @property
    def body(self) -> Any:
        return json.loads(self.raw or b"null")


@dataclass
class CallbackReceiver:
    """A loopback callback server keeping each request (raw body included); `script[path]` lists the
    answers (an `Answer` or a status) to give before 200. Every answer carries `reply` as its body."""

    received: list[Received] = field(default_factory=list)
    script: dict[str, list[Answer | int]] = field(default_factory=dict)
    reply: bytes = b""
    server: ThreadingHTTPServer | None = None
    # What `Received.at` reads: real time, or a test clock's time as epoch seconds.
    clock: Callable[[], float] = time.time

    def start(self) -> CallbackReceiver:
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.body()
                answers = receiver.script.get(self.path) or []
                answer = answers.pop(0) if answers else Answer()
                if isinstance(answer, int):
                    answer = Answer(answer)
                receiver.received.append(Received(receiver.clock(), self.path, dict(self.headers), raw, answer.status))
                time.sleep(answer.hang)
                headers = {**answer.headers, **({"Content-Type": "application/json"} if receiver.reply else {})}
                try:
                    self.answer(answer.status, receiver.reply, headers)
                except OSError:
                    return  # the dispatcher cut a hanging exchange

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        assert self.server is not None
        shut(self.server)

    def url(self, path: str = "") -> str:
        return base_url(self.server) + path

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(self.at(path)) < count:
            time.sleep(0.05)
        return self.at(path)
