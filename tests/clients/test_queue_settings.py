"""Every queue setting of the contract is a typed argument of `put_queue` and a field of `Queue`, in both
clients, from one declaration (`hourglass_client.queue_settings`)."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from typing import Any

from hourglass.core import validation
from hourglass_client import AsyncClient, Client, Queue, QueueSettings, breaker, ordering, window
from hourglass_client.queue_settings import setting_names

from tests.clients.conftest import API_KEY, RawReceiver

# Read-only fields of the queue document (changed by /pause and /resume, or by the circuit breaker).
READ_ONLY = {"paused", "paused_reason"}
SECRETS = {"signing_secret", "signing_secret_next"}  # never returned by GET


def every_setting(receiver: RawReceiver) -> dict[str, Any]:
    return {
        "default_delay": 5,
        "max_delay": 3600,
        "ttl": 600,
        "target": {"type": "http", "url": receiver.url("/settings")},
        "retry": {"max_attempts": 3, "backoff_base": 2, "backoff_max": 60},
        "signing_secret": "old-secret",
        "signing_secret_next": "new-secret",
        "rate_limit": 20,
        "max_concurrency": 5,
        "timeout": 10,
        "failure_destination": {"type": "http", "url": receiver.url("/failures")},
        "window": window("09:00", "18:00", timezone="Europe/Paris", days=["mon", "tue"]),
        "circuit_breaker": breaker(0.5, 20, 300),
        "flow_control": {"key_rate_limit": 5, "key_max_concurrency": 2},
        "ordering": ordering("hold"),
    }


def test_the_declaration_holds_every_setting_the_server_accepts() -> None:
    assert set(setting_names()) == set(validation.QUEUE_FIELDS) - READ_ONLY


def test_each_setting_is_a_keyword_of_put_queue_and_a_field_of_queue_in_both_clients() -> None:
    for client in (Client("http://127.0.0.1:9"), AsyncClient("http://127.0.0.1:9")):
        arguments = inspect.signature(client.put_queue).parameters
        assert set(setting_names()) <= {n for n, p in arguments.items() if p.kind is p.KEYWORD_ONLY}
    assert issubclass(Queue, QueueSettings)


def assert_holds(got: Queue, given: dict[str, Any]) -> None:
    """Every setting given reads back (documents may come back with the server's defaults filled in)."""
    for name, value in given.items():
        if name in SECRETS:
            continue
        read = getattr(got, name)
        if isinstance(value, dict):
            assert {k: read.get(k) for k in value} == value, name
        else:
            assert read == value, name


def test_every_setting_round_trips_through_the_sync_client(client: Client, receiver: RawReceiver) -> None:
    name = f"qs-{uuid.uuid4().hex[:8]}"
    given = every_setting(receiver)
    client.put_queue(name, **given)
    assert_holds(client.get_queue(name), given)


def test_every_setting_round_trips_through_the_async_client(api_url: str, receiver: RawReceiver) -> None:
    name = f"qs-{uuid.uuid4().hex[:8]}"
    given = every_setting(receiver)

    async def scenario() -> Queue:
        async with AsyncClient(api_url, API_KEY) as hg:
            await hg.put_queue(name, **given)
            return await hg.get_queue(name)

    assert_holds(asyncio.run(scenario()), given)


def test_raw_settings_are_merged_last(client: Client) -> None:
    name = f"qs-{uuid.uuid4().hex[:8]}"
    got = client.put_queue(name, rate_limit=5, settings={"rate_limit": 7})
    assert got.rate_limit == 7
