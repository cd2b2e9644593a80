"""HMAC-SHA256 signatures for HTTP callbacks: `t=<unix>,v1=<hex>` over "<t>.<body>"."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"

