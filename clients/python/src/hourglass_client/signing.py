"""Callback signatures: `Hourglass-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, one `v1`
per secret the queue signs with (two during a key rotation)."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

HEADER = "Hourglass-Signature"
DEFAULT_TOLERANCE = 300


def sign(secret: str, raw_body: bytes, timestamp: int) -> str:
    """The header value Hourglass sends for `raw_body` at `timestamp` (for receivers' tests)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw_body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify(
    headers: Mapping[str, str],
    raw_body: bytes,
    secret: str | Iterable[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """True when the request's signature header signs `raw_body` with `secret` (or with any of several
    secrets, e.g. the old and the new one while receivers roll), made within `tolerance` seconds of
    `now` (default: the current time). Pass the body bytes as received, before any JSON parsing:
    re-serialised JSON does not match."""
    header = _header(headers, HEADER)
    if not header:
        return False
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        return False
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = [sign(s, raw_body, timestamp).split("v1=", 1)[1].encode() for s in secrets]
    given = [value.encode() for value in parts.get("v1", [])]
    return any(hmac.compare_digest(e, g) for e in expected for g in given)
