"""A loopback HTTP callback server whose answers the message bodies script, recording every request."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    id: str
    attempt: int
    due_at: str
    at: float
    status: int
    body: Any


@dataclass
class Callback:
    """Answers each request from its message body: `{"answers": [503, 404, ...], "hold": s}` (then 200).

    `answers[n]` answers the (n + 1)th request for that message; `hold` delays the first answer.
    """

    requests: list[Request] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Callback:
        callback = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                at = time.time()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"null")
                message_id = str(self.headers.get("Hourglass-Message-Id"))
                script = body if isinstance(body, dict) else {}
                answers = script.get("answers") or []
                with callback.lock:
                    seen = sum(1 for r in callback.requests if r.id == message_id)
                    status = answers[seen] if seen < len(answers) else 200
                    attempt = int(self.headers.get("Hourglass-Attempt", "1"))
                    request = Request(message_id, attempt, str(self.headers.get("Hourglass-Due-At")), at, status, body)
                    callback.requests.append(request)
                if seen == 0 and script.get("hold"):
                    time.sleep(float(script["hold"]))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="loopback", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def snapshot(self) -> list[Request]:
        with self.lock:
            return list(self.requests)

    def succeeded(self) -> set[str]:
        return {r.id for r in self.snapshot() if 200 <= r.status < 300}

    def wait_until(self, ids: set[str], timeout: float) -> set[str]:
        """Waits until every id got a 2xx answer; returns the ones still missing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            missing = ids - self.succeeded()
            if not missing:
                return missing
            time.sleep(0.1)
        return ids - self.succeeded()
