"""HMAC-SHA256 signatures for HTTP callbacks: `t=<unix>,v1=<hex>` over "<t>.<body>", one `v1` per secret."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence


def _mac(secret: str, body: bytes, timestamp: int) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int) -> str:
    return header((secret,), body, timestamp)


def header(secrets: Sequence[str], body: bytes, timestamp: int) -> str:
    """The `Hourglass-Signature` value: during a key rotation (current and next secret) it carries both
    signatures, so a receiver that knows either secret verifies it."""
    return ",".join([f"t={timestamp}", *(f"v1={_mac(secret, body, timestamp)}" for secret in secrets)])
