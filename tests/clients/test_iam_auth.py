"""`auth="iam"` end to end: the SDK (sync and async) and the CLI sign with botocore's SigV4 signer from the
credential chain, and the local gateway (HOURGLASS_AUTH=iam) recomputes each signature with the emulator's
credentials; an unsigned or wrongly signed request is a 403."""

from __future__ import annotations

import asyncio
import copy
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace

import botocore.session
import pytest
from click.testing import CliRunner
from hourglass.handlers import api as api_handler
from hourglass.service.rest import Api
from hourglass_client import AsyncClient, Client, HourglassError
from hourglass_client.cli import main
from hourglass_client.sigv4 import SigV4Signer

from devstack.gateway import Gateway
from devstack.runtime import Runtime
from devstack.sigv4 import SigV4Check


@pytest.fixture(scope="module")
def iam_url(client_runtime: Runtime) -> Iterator[str]:
    """The package's runtime behind a gateway that requires SigV4 and no API key (as `hourglass:auth=iam`)."""
    assert client_runtime.context is not None
    context = copy.copy(client_runtime.context)
    context.settings = replace(context.settings, api_key=None)
    api = Api(context)
    check = SigV4Check.of_emulator(client_runtime.config.region)
    gateway = Gateway(lambda event, _: api_handler.handle(api, event), 0, lambda: True, authenticate=check)
    gateway.start()
    yield gateway.url
    gateway.stop()


def queue_name() -> str:
    return f"iam-{uuid.uuid4().hex[:8]}"


def test_the_sync_client_signs_its_requests(iam_url: str) -> None:
    client = Client(iam_url, auth="iam")
    name = queue_name()
    client.put_queue(name, default_delay=30)
    assert client.get_queue(name).default_delay == 30


def test_the_async_client_signs_its_requests(iam_url: str) -> None:
    async def story() -> float:
        client = AsyncClient(iam_url, auth="iam")
        name = queue_name()
        await client.put_queue(name, default_delay=45)
        return (await client.get_queue(name)).default_delay

    assert asyncio.run(story()) == 45


def test_the_cli_signs_its_requests(iam_url: str) -> None:
    runner = CliRunner(env={"HOURGLASS_URL": iam_url, "HOURGLASS_API_KEY": None, "COLUMNS": "250"})
    name = queue_name()
    put = runner.invoke(main, ["--auth", "iam", "queues", "put", name, "--ttl", "90"], catch_exceptions=False)
    assert put.exit_code == 0, put.output
    got = runner.invoke(main, ["--auth", "iam", "--json", "queues", "get", name], catch_exceptions=False)
    assert json.loads(got.stdout)["ttl"] == 90


def test_an_unsigned_request_is_refused(iam_url: str) -> None:
    with pytest.raises(HourglassError) as refused:
        Client(iam_url).list_queues()
    assert refused.value.status == 403


def test_a_signature_by_other_credentials_is_refused(iam_url: str) -> None:
    session = botocore.session.Session()
    session.set_credentials("testing", "not-the-emulators-secret", "testing")
    client = Client(iam_url)
    client.transport.sign = SigV4Signer(iam_url, region="us-east-1", session=session)
    with pytest.raises(HourglassError) as refused:
        client.put_queue(queue_name())
    assert refused.value.status == 403


def test_a_signed_request_whose_body_changed_is_refused(iam_url: str) -> None:
    url = f"{iam_url}/v1/queues/{queue_name()}"
    headers = SigV4Signer(iam_url)("PUT", url, b'{"ttl": 60}', {"Content-Type": "application/json"})
    request = urllib.request.Request(url, data=b'{"ttl": 61}', headers=headers, method="PUT")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
