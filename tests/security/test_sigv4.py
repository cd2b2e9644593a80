"""The local runtime's SigV4 check (devstack.sigv4) accepts what botocore's signer signs and nothing altered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import botocore.session
import pytest
from botocore.credentials import ReadOnlyCredentials
from hourglass_client.sigv4 import SigV4Signer, region_of

from devstack.sigv4 import SigV4Check

HOST = "127.0.0.1:8080"
URL = f"http://{HOST}/v1/queues/orders/messages?status=pending&limit=5"
PATH = "/v1/queues/orders/messages?status=pending&limit=5"
BODY = b'{"messages": [{"body": 1}]}'
CHECK = SigV4Check(ReadOnlyCredentials("AKIDLOCAL", "local-secret", None), "us-east-1")


def signed(secret: str = "local-secret", key: str = "AKIDLOCAL", region: str = "us-east-1") -> dict[str, str]:
    session = botocore.session.Session()
    session.set_credentials(key, secret)
    signer = SigV4Signer(URL, region=region, session=session)
    headers = signer("POST", URL, BODY, {"Content-Type": "application/json", "Host": HOST})
    return {name.lower(): value for name, value in headers.items()}


def stamp(headers: dict[str, str]) -> datetime:
    return datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def test_a_request_signed_with_the_emulators_credentials_passes() -> None:
    headers = signed()
    assert CHECK.refusal("POST", PATH, headers, BODY, stamp(headers)) is None


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", PATH, BODY),
        ("POST", "/v1/queues/other/messages?status=pending&limit=5", BODY),
        ("POST", PATH.replace("limit=5", "limit=6"), BODY),
        ("POST", PATH, BODY.replace(b"1", b"2")),
    ],
)
def test_a_changed_method_path_query_or_body_is_refused(method: str, path: str, body: bytes) -> None:
    headers = signed()
    assert CHECK.refusal(method, path, headers, body, stamp(headers)) is not None


def test_a_signature_by_another_secret_is_refused() -> None:
    headers = signed(secret="guessed")
    refused = CHECK.refusal("POST", PATH, headers, BODY, stamp(headers))
    assert refused is not None and refused[0] == 403 and "signature" in refused[2]


def test_another_access_key_or_region_is_refused() -> None:
    for headers in (signed(key="AKIDOTHER"), signed(region="eu-west-1")):
        assert CHECK.refusal("POST", PATH, headers, BODY, stamp(headers)) is not None


def test_an_unsigned_request_is_refused() -> None:
    refused = CHECK.refusal("POST", PATH, {"host": HOST}, BODY, datetime.now(UTC))
    assert refused is not None and refused[0] == 403


def test_a_signature_older_than_fifteen_minutes_is_refused() -> None:
    headers = signed()
    assert CHECK.refusal("POST", PATH, headers, BODY, stamp(headers) + timedelta(minutes=14)) is None
    assert CHECK.refusal("POST", PATH, headers, BODY, stamp(headers) + timedelta(minutes=16)) is not None


def test_the_sdk_reads_the_region_from_an_api_gateway_url() -> None:
    assert region_of("https://abc123.execute-api.eu-west-2.amazonaws.com/prod/") == "eu-west-2"
    assert region_of("http://127.0.0.1:8080") is None
