"""One JSON request to the Hourglass REST API over urllib, as (status, document): for the smoke test,
the benchmarks and the tests that speak raw HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def call(
    base_url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    api_key: str | None = None,
    raw: bytes | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """`body` as JSON (or `raw` as it is); `x-api-key` when `api_key` is set. An HTTP error is a status too."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("x-api-key", api_key)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _document(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _document(exc.read())


def document(base_url: str, method: str, path: str, body: Any = None, *, timeout: float = 60.0) -> Any:
    """The answer's document of `call`; an HTTP error status raises."""
    status, doc = call(base_url, method, path, body, timeout=timeout)
    if status >= 400:
        raise RuntimeError(f"{method} {path}: {status} {doc}")
    return doc


def _document(text: bytes) -> Any:
    """JSON when the body is JSON, its text otherwise, None when it is empty."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text.decode(errors="replace")
