"""The local API Gateway: HTTP on loopback, each request turned into a Lambda proxy event.

Like API Gateway and Lambda it refuses request bodies over 10 MB (413) and answers 502 for responses
over 6 MB. As a service on the developer's machine it also refuses what a web page could send
(contract v1.1): a `Host` other than its own address or an `Origin` of another site (403), and a
body that is not declared `application/json` (415), so no page can drive it or read its answers.
With an `authenticate` check (HOURGLASS_AUTH=iam) every route but the public ones needs what it asks (403).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from hourglass.core import limits
from hourglass.version import __version__

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# (method, raw path, lower-case headers, body) -> why the request is refused (status, code, message), or None.
Authenticate = Callable[[str, str, Mapping[str, str], bytes], tuple[int, str, str] | None]
MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit
# Lambda's synchronous response limit, on the whole serialized proxy response (limits.proxy_response_bytes).
MAX_RESPONSE = limits.LAMBDA_RESPONSE_BYTES
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# The console's static page, public in the stack whatever `hourglass:auth` says (stacks/constructs/rest_api.py).
PUBLIC_PATH = re.compile(r"/console(/[^/]*)?")


def own_hosts(port: int) -> frozenset[str]:
    """The `Host` values a request to this runtime carries: its loopback names with the port."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def body_length(headers: Mapping[str, str]) -> int | None:
    """The declared body length when it is valid and within MAX_BODY; None otherwise."""
    raw = headers.get("content-length", "0").strip() or "0"
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_BODY:
        return None
    return int(raw)


def refusal(method: str, headers: Mapping[str, str], port: int) -> tuple[int, str, str] | None:
    """Why a request may not reach the API (status, code, message), or None; `headers` in lower case."""
    host = headers.get("host", "").strip().lower()
    if host not in own_hosts(port):
        return 403, "forbidden", f"Host {host[:100]!r} is not this runtime's address (127.0.0.1:{port})"
    origin = headers.get("origin")
    if origin is not None and origin.strip().lower() not in {f"http://{h}" for h in own_hosts(port)}:
        return 403, "forbidden", f"Origin {origin[:100]!r} is another site"
    if "transfer-encoding" in headers:
        return 411, "length_required", "send the body with a Content-Length"
    raw_length = headers.get("content-length", "0").strip() or "0"
    if not (raw_length.isascii() and raw_length.isdigit()):
        return 400, "invalid_request", "Content-Length must be a non-negative integer"
    length = body_length(headers)
    if length is None:
        return 413, "too_large", "body: request body is too large"
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if method in BODY_METHODS and length > 0 and media_type != "application/json":
        return 415, "unsupported_media_type", "a request body needs Content-Type: application/json"
    return None


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
    def __init__(
        self, handler: Handler, port: int, is_ready: Callable[[], bool], authenticate: Authenticate | None = None
    ) -> None:
        self.handler = handler
        self.is_ready = is_ready
        self.authenticate = authenticate
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._request_class())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="gateway", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

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
                lower = {k.lower(): v for k, v in self.headers.items()}
                refused = refusal(self.command, lower, gateway.port)
                if refused:
                    status, code, message = refused
                    length = body_length(lower)
                    if length is not None and "transfer-encoding" not in lower:
                        # A body of a valid size is read first: closing on unread data resets the
                        # connection, and the client could lose the answer.
                        self.rfile.read(length)
                    self._send(status, {"error": {"code": code, "message": message}})
                    self.close_connection = True  # a body too large or of unknown length is left unread
                    return
                if urlsplit(self.path).path.rstrip("/") == "/health":
                    ready = gateway.is_ready()
                    self._send(200 if ready else 503, {"status": "ok" if ready else "starting", "version": __version__})
                    return
                length = int(lower.get("content-length", "0").strip() or "0")
                body = self.rfile.read(length) if length else b""
                public = self.command == "GET" and PUBLIC_PATH.fullmatch(urlsplit(self.path).path)
                denied = (
                    None
                    if gateway.authenticate is None or public
                    else gateway.authenticate(self.command, self.path, lower, body)
                )
                if denied:
                    status, code, message = denied
                    self._send(status, {"error": {"code": code, "message": message}})
                    return
                headers = {k: v for k, v in self.headers.items()}
                event = proxy_event(self.command, self.path, headers, body)
                response = gateway.handler(event, None)
                payload = (response.get("body") or "").encode()
                if limits.proxy_response_bytes(response) > MAX_RESPONSE:
                    # What API Gateway answers when Lambda refuses a response over its limit.
                    self._send(502, {"message": "Internal server error"})
                    return
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
