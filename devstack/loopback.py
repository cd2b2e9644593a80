"""Loopback HTTP servers: a handler served on a free 127.0.0.1 port from a daemon thread, as the
benchmarks' and the tests' callback targets and fake APIs are."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# socketserver's own listen backlog: it refuses connections when a burst arrives at once.
DEFAULT_BACKLOG = 5


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that does not log each request to stderr."""

    def log_message(self, *args: Any) -> None:
        return

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self, status: int, payload: bytes = b"", headers: dict[str, str] | None = None) -> None:
        reply(self, status, payload, headers)


def reply(
    handler: BaseHTTPRequestHandler, status: int, payload: bytes = b"", headers: dict[str, str] | None = None
) -> None:
    """`status` with `headers` and `payload` (its Content-Length set)."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def serve(handler: type[BaseHTTPRequestHandler], *, backlog: int = DEFAULT_BACKLOG) -> ThreadingHTTPServer:
    """`handler` served on a free loopback port, from a daemon thread; `shut` stops it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
    server.request_queue_size = backlog
    try:
        server.server_bind()
        server.server_activate()
    except OSError:
        server.server_close()
        raise
    threading.Thread(target=server.serve_forever, name="loopback", daemon=True).start()
    return server


def shut(server: ThreadingHTTPServer) -> None:
    """Stops serving (its thread ends) and closes the port; a request in progress finishes on its own."""
    server.shutdown()
    server.server_close()


def base_url(server: ThreadingHTTPServer | None) -> str:
    assert server is not None
    return f"http://127.0.0.1:{server.server_address[1]}"
