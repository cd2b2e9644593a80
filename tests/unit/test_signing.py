"""HMAC-SHA256 callback signatures, checked as receivers check them (the client SDK's `verify`)."""

from __future__ import annotations

import hashlib
import hmac

import hourglass_client
from hourglass.core.signing import header as signature_header
from hourglass.core.signing import sign

T = 1795255200  # 2026-11-21T10:00:00Z
BODY = b'{"order":42}'


def verify(secret: str, body: bytes, header: str, *, now: int, tolerance: int = 300) -> bool:
    return hourglass_client.verify({"Hourglass-Signature": header}, body, secret, now=now, tolerance=tolerance)


def test_signature_format_matches_the_contract():
    expected = hmac.new(b"secret", f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign("secret", BODY, T) == f"t={T},v1={expected}"


def test_round_trip_verifies():
    assert verify("secret", BODY, sign("secret", BODY, T), now=T)


def test_tampered_body_fails():
    assert not verify("secret", b'{"order":43}', sign("secret", BODY, T), now=T)


def test_wrong_secret_fails():
    assert not verify("other", BODY, sign("secret", BODY, T), now=T)


def test_tampered_timestamp_fails():
    header = sign("secret", BODY, T).replace(f"t={T}", f"t={T + 1}")
    assert not verify("secret", BODY, header, now=T)


def test_within_tolerance_verifies():
    header = sign("secret", BODY, T)
    assert verify("secret", BODY, header, now=T + 300)
    assert verify("secret", BODY, header, now=T - 300)


def test_outside_tolerance_fails():
    header = sign("secret", BODY, T)
    assert not verify("secret", BODY, header, now=T + 301)
    assert not verify("secret", BODY, header, now=T - 301)


def test_custom_tolerance():
    assert not verify("secret", BODY, sign("secret", BODY, T), now=T + 10, tolerance=5)


def test_malformed_headers_fail():
    for header in ["", "garbage", "t=abc,v1=00", f"v1={'0' * 64}", f"t={T}", f"t={T},v1=é", "t=1=2,,"]:
        assert not verify("secret", BODY, header, now=T), header


def test_a_rotation_signs_with_each_secret():
    value = signature_header(("old", "new"), BODY, T)
    assert value == f"{sign('old', BODY, T)},v1={sign('new', BODY, T).split('v1=')[1]}"


def test_during_a_rotation_a_receiver_knowing_either_secret_verifies():
    value = signature_header(("old", "new"), BODY, T)
    assert verify("old", BODY, value, now=T)
    assert verify("new", BODY, value, now=T)
    assert hourglass_client.verify({"Hourglass-Signature": value}, BODY, ["stale", "new"], now=T)


def test_during_a_rotation_a_receiver_knowing_neither_secret_fails():
    assert not hourglass_client.verify(
        {"Hourglass-Signature": signature_header(("old", "new"), BODY, T)}, BODY, ["stale", "other"], now=T
    )


def test_either_secret_is_refused_outside_the_tolerance():
    value = signature_header(("old", "new"), BODY, T)
    assert not hourglass_client.verify({"Hourglass-Signature": value}, BODY, ["old", "new"], now=T + 301)
