"""The local IAM check (HOURGLASS_AUTH=iam) against a SigV4 signer nobody here wrote: requests-aws4auth, with the
documented credentials (testing/testing), through the local gateway on a loopback port this test starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from botocore.credentials import ReadOnlyCredentials
from hourglass.handlers import api as api_handler
from requests_aws4auth import AWS4Auth

from devstack.gateway import Gateway
from devstack.sigv4 import SigV4Check
from tests.integration.conftest import Harness
from tests.security.test_local_gateway import stored

REGION = "us-east-1"
# What `make dev` checks against: the emulator's dummy credentials, session token included (devstack/emulator.py).
EMULATOR = ReadOnlyCredentials("testing", "testing", "testing")
BODY = b'{"messages": [{"body": "signed"}]}'
TAMPERED = b'{"messages": [{"body": "tampered"}, {"body": "extra"}]}'


@pytest.fixture
def url(harness: Harness) -> Iterator[str]:
    check = SigV4Check(EMULATOR, REGION)
    started = Gateway(lambda event, _: api_handler.handle(harness.api, event), 0, lambda: True, authenticate=check)
    started.start()
    harness.call("PUT", "/v1/queues/q", {})
    yield f"http://127.0.0.1:{started.port}/v1/queues/q/messages"
    started.stop()


def signed(url: str, body: bytes, auth: AWS4Auth) -> requests.PreparedRequest:
    request = requests.Request("POST", url, data=body, headers={"Content-Type": "application/json"}, auth=auth)
    return request.prepare()


def send(prepared: requests.PreparedRequest) -> int:
    with requests.Session() as session:
        return session.send(prepared, timeout=30).status_code


def documented(token: str | None = None) -> AWS4Auth:
    return AWS4Auth("testing", "testing", REGION, "execute-api", session_token=token)


def test_the_documented_credentials_without_a_session_token_are_accepted(harness: Harness, url: str) -> None:
    assert (send(signed(url, BODY, documented())), stored(harness)) == (201, 2)


def test_the_emulators_session_token_is_accepted(harness: Harness, url: str) -> None:
    assert (send(signed(url, BODY, documented("testing"))), stored(harness)) == (201, 2)


def test_another_session_token_is_refused(harness: Harness, url: str) -> None:
    assert (send(signed(url, BODY, documented("forged"))), stored(harness)) == (403, 1)


def test_a_body_replaced_after_signing_is_refused_and_nothing_is_stored(harness: Harness, url: str) -> None:
    prepared = signed(url, BODY, documented("testing"))
    assert "x-amz-content-sha256" in prepared.headers["Authorization"]  # the hash header is signed
    prepared.body = TAMPERED
    prepared.headers["Content-Length"] = str(len(TAMPERED))
    assert (send(prepared), stored(harness)) == (403, 1)


def test_another_secret_is_refused(harness: Harness, url: str) -> None:
    auth = AWS4Auth("testing", "guessed", REGION, "execute-api")
    assert (send(signed(url, BODY, auth)), stored(harness)) == (403, 1)

