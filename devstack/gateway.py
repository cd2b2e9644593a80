"""The local API Gateway: HTTP on loopback, each request turned into a Lambda proxy event."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit


def proxy_event(method: str, raw_path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    parts = urlsplit(raw_path)
    try:
        text: str | None = body.decode("utf-8") if body else None
        is_base64 = False
    except UnicodeDecodeError:
        text, is_base64 = base64.b64encode(body).decode(), True
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return {
        "resource": "/{proxy+}",
        "path": unquote(parts.path),
        "httpMethod": method,
        "headers": headers,
        "queryStringParameters": query or None,
        "pathParameters": {"proxy": unquote(parts.path).lstrip("/")},
        "requestContext": {"requestId": str(uuid.uuid4()), "stage": "local"},
        "body": text,
        "isBase64Encoded": is_base64,
    }


class Gateway:
    def __init__(self, handler: Handler, port: int, is_ready: Callable[[], bool]) -> None:
        self.handler = handler
        self.is_ready = is_ready
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._request_class())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="gateway", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _request_class(self) -> type[BaseHTTPRequestHandler]:
        gateway = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self) -> None:
                if urlsplit(self.path).path.rstrip("/") == "/health":
                    ready = gateway.is_ready()
                    self._send(200 if ready else 503, {"status": "ok" if ready else "starting"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(413, {"error": {"code": "too_large", "message": "body: request body is too large"}})
                    self.close_connection = True
                    return
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items()}
                event = proxy_event(self.command, self.path, headers, body)
                response = gateway.handler(event, None)
                payload = (response.get("body") or "").encode()
                self.send_response(int(response["statusCode"]))
                for name, value in (response.get("headers") or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _send(self, status: int, doc: Any) -> None:
                payload = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

        return RequestHandler
