"""HMAC-SHA256 signatures for HTTP callbacks: `t=<unix>,v1=<hex>` over "<t>.<body>"."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(secret: str, body: bytes, header: str, *, now: int, tolerance: int = 300) -> bool:
    """True when `header` signs `body` with `secret` within `tolerance` seconds of `now`."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).encode()
    return hmac.compare_digest(expected, f"t={timestamp},v1={parts.get('v1', '')}".encode())
