"""Loopback HTTP callback targets that record when each message arrived (wall clock, like due times):
by message id, or every request with the most in flight at once."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from devstack.loopback import QuietHandler, base_url, serve, shut

# The default listen backlog (5) refuses connections when dozens of deliveries arrive at once.
BACKLOG = 512


class Receiver:
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.duplicates = 0
        self.times: dict[str, int] = {}  # requests per message id
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return base_url(self.server) + "/hook"

    def start(self) -> Receiver:
        self.server = serve(self._handler_class(), backlog=BACKLOG)
        return self

    def stop(self) -> None:
        assert self.server is not None
        shut(self.server)

    def _record(self, message_id: str, at: float) -> None:
        with self._lock:
            self.times[message_id] = self.times.get(message_id, 0) + 1
            if message_id in self.arrived:
                self.duplicates += 1
            else:
                self.arrived[message_id] = at

    def _handler_class(self) -> type[QuietHandler]:
        receiver = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                at = time.time()  # as soon as the request line and headers are in
                self.body()
                receiver._record(self.headers.get("Hourglass-Message-Id", ""), at)
                self.answer(200)

        return Handler


@dataclass
class Counting:
    """Every request's arrival time and JSON body, and the most requests in flight at once; each request
    is held `hold` seconds before its 200."""

    hold: float = 0.0
    arrivals: list[tuple[float, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Counting:
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                at = time.time()
                body = json.loads(self.body() or b"null")
                with receiver.lock:
                    receiver.arrivals.append((at, body))
                    receiver.in_flight += 1
                    receiver.peak = max(receiver.peak, receiver.in_flight)
                time.sleep(receiver.hold)
                with receiver.lock:
                    receiver.in_flight -= 1
                self.answer(200)

        self.server = serve(Handler, backlog=256)
        return self

    def stop(self) -> None:
        assert self.server is not None
        shut(self.server)

    def url(self) -> str:
        return base_url(self.server) + "/hit"

    def wait_for(self, count: int, timeout: float, settle: float = 1.0) -> list[tuple[float, Any]]:
        """The arrivals once `count` are in (or `timeout` passed), and `settle` seconds more: a duplicate
        would show."""
        end = time.time() + timeout
        while time.time() < end and len(self.arrivals) < count:
            time.sleep(0.05)
        time.sleep(settle)
        return list(self.arrivals)
