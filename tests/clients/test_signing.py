"""The SDK's `verify` accepts exactly what the service's signer (hourglass.core.signing) produces."""

from __future__ import annotations

from hourglass.core import signing
from hourglass_client import sign, verify

NOW = 1_795_000_000
BODY = b'{"order": 42, "note": "caf\xc3\xa9"}'


def test_verify_accepts_the_services_signature() -> None:
    header = signing.sign("secret", BODY, NOW)
    assert verify({"Hourglass-Signature": header}, BODY, "secret", now=NOW + 10)


def test_header_names_are_case_insensitive() -> None:
    assert verify({"hourglass-signature": signing.sign("secret", BODY, NOW)}, BODY, "secret", now=NOW)


def test_sdk_sign_matches_the_service() -> None:
    assert sign("secret", BODY, NOW) == signing.sign("secret", BODY, NOW)


def test_a_changed_body_is_refused() -> None:
    header = signing.sign("secret", BODY, NOW)
    assert not verify({"Hourglass-Signature": header}, BODY.replace(b"42", b"43"), "secret", now=NOW)


def test_another_secret_is_refused() -> None:
    assert not verify({"Hourglass-Signature": signing.sign("other", BODY, NOW)}, BODY, "secret", now=NOW)


def test_an_old_signature_is_refused() -> None:
    header = signing.sign("secret", BODY, NOW)
    assert not verify({"Hourglass-Signature": header}, BODY, "secret", now=NOW + 301)
    assert verify({"Hourglass-Signature": header}, BODY, "secret", now=NOW + 301, tolerance=600)


def test_a_missing_or_malformed_header_is_refused() -> None:
    assert not verify({}, BODY, "secret", now=NOW)
    assert not verify({"Hourglass-Signature": "v1=abc"}, BODY, "secret", now=NOW)
    assert not verify({"Hourglass-Signature": "t=soon,v1=abc"}, BODY, "secret", now=NOW)
