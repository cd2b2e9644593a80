"""HTTP calls with retries: exponential backoff with full jitter on 429/503, honouring Retry-After."""

from __future__ import annotations

import email.utils
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from hourglass_client import errors

RETRY_STATUSES = frozenset({429, 503})
USER_AGENT = "hourglass-client-python/0.1"


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; the wait before try n+1 is uniform in [0, min(cap, base * 2**n)]
    (full jitter), and never shorter than a Retry-After the server sent (up to `max_retry_after`)."""

    attempts: int = 5
    base: float = 0.25
    cap: float = 8.0
    max_retry_after: float = 60.0

    def wait(self, retry: int, retry_after: float | None, rng: Callable[[], float]) -> float:
        backoff = rng() * min(self.cap, self.base * 2.0**retry)
        if retry_after is not None:
            return max(backoff, min(retry_after, self.max_retry_after))
        return backoff


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header (seconds or HTTP date) as seconds from now, or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def encode(body: Any) -> bytes:
    """A request body as this client sends it (what the API's size limits measure)."""
    return json.dumps(body, allow_nan=False).encode()


def path(*parts: str) -> str:
    """A URL path from segments, each percent-encoded (names and ids never split the path)."""
    return "/" + "/".join(quote(p, safe="") for p in parts)


@dataclass
class Transport:
    base_url: str
    api_key: str | None = None
    timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    rng: Callable[[], float] = random.random
    # Signs a request: (method, url, body, headers) -> the headers to send (SigV4 under auth="iam").
    sign: Callable[[str, str, bytes | None, Mapping[str, str]], dict[str, str]] | None = None
    closed: bool = False

    def close(self) -> None:
        """No request is sent after this (each request opens and closes its own connection)."""
        self.closed = True

    def request(
        self,
        method: str,
        route: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        retry_on: frozenset[int] = RETRY_STATUSES,
        retry_transport: bool = True,
    ) -> tuple[int, Any]:
        """Sends one call (with retries on `retry_on` statuses, and on transport errors when
        `retry_transport`); returns (status, decoded JSON or None) or raises an HourglassError."""
        if self.closed:
            raise RuntimeError("the client is closed")
        query = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (params or {}).items() if v is not None
        }
        url = self.base_url.rstrip("/") + route + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else encode(body)
        for retry in range(self.retry.attempts):
            last = retry == self.retry.attempts - 1
            try:
                status, headers, payload = self._send(method, url, data)
            except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
                if last or not retry_transport:
                    raise errors.TransportError(f"{method} {url}: {getattr(exc, 'reason', exc)}") from exc
                self.sleep(self.retry.wait(retry, None, self.rng))
                continue
            if status < 400:
                if isinstance(payload, errors.NotJson):  # every answer of the API is JSON: this is another server
                    message = errors.not_json(payload, headers.get("Content-Type"))
                    raise errors.HourglassError(status, "not_json", message, payload)
                return status, payload
            if status in retry_on and not last:
                self.sleep(self.retry.wait(retry, retry_after_seconds(headers.get("Retry-After")), self.rng))
                continue
            raise errors.from_response(status, payload, headers.get("Content-Type"))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _send(self, method: str, url: str, data: bytes | None) -> tuple[int, Any, Any]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["x-api-key"] = self.api_key
        if self.sign is not None:
            headers = self.sign(method, url, data, headers)
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.headers, _decode(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.headers, _decode(exc.read())


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return errors.NotJson(raw.decode("utf-8", "replace"))
