"""A loopback HTTP callback target that records when each message arrived (wall clock, like due times)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) refuses connections when dozens of deliveries arrive at once.
    request_queue_size = 512
    daemon_threads = True


class Receiver:
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.duplicates = 0
        self.times: dict[str, int] = {}  # requests per message id
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), self._handler_class())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, name="receiver", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _record(self, message_id: str, at: float) -> None:
        with self._lock:
            self.times[message_id] = self.times.get(message_id, 0) + 1
            if message_id in self.arrived:
                self.duplicates += 1
            else:
                self.arrived[message_id] = at

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                at = time.time()  # as soon as the request line and headers are in
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver._record(self.headers.get("Hourglass-Message-Id", ""), at)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        return Handler
