"""SDK and CLI for v1.2's schedule policies (`catch_up`, `jitter`) and the queue's circuit breaker, against the
local runtime: the documents show them, and a breaker that trips shows why the queue paused."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hourglass_client import AsyncClient, BadRequest, Client, breaker

from tests.clients.conftest import API_KEY, RawReceiver, eventually


def fresh(prefix: str = "pol") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_sdk_schedule_shows_its_catch_up_and_jitter(client: Client, queue: str) -> None:
    schedule = client.put_schedule(queue, "daily", cron="0 9 * * *", body={}, catch_up="all", jitter=120)
    assert (schedule.catch_up, schedule.jitter) == ("all", 120)
    assert (client.get_schedule(queue, "daily").catch_up, client.get_schedule(queue, "daily").jitter) == ("all", 120)


def test_sdk_schedule_without_policies_shows_the_defaults(client: Client, queue: str) -> None:
    schedule = client.put_schedule(queue, "plain", every=3600, body={})
    assert (schedule.catch_up, schedule.jitter) == ("skip", 0)


def test_async_put_queue_keeps_the_breaker(api_url: str, receiver: RawReceiver) -> None:
    async def put() -> Any:
        return await AsyncClient(api_url, API_KEY).put_queue(
            fresh(), target={"type": "http", "url": receiver.url("/aio")}, circuit_breaker=breaker(0.5, 20, 300)
        )

    created = asyncio.run(put())
    assert (created.circuit_breaker, created.paused, created.paused_reason) == (
        {"failure_ratio": 0.5, "min_attempts": 20, "window": 300},
        False,
        None,
    )


def test_a_bad_breaker_is_a_400_naming_the_field(client: Client, receiver: RawReceiver) -> None:
    with pytest.raises(BadRequest, match="failure_ratio"):
        client.put_queue(
            fresh(), target={"type": "http", "url": receiver.url("/x")}, circuit_breaker=breaker(2.0, 20, 300)
        )


def test_a_tripped_breaker_shows_its_reason_in_the_sdk_and_the_queue_table(
    run: Any, client: Client, receiver: RawReceiver
) -> None:
    name = fresh("trip")
    receiver.script[f"/{name}"] = [500, 500, 500]
    client.put_queue(
        name,
        target={"type": "http", "url": receiver.url(f"/{name}")},
        retry={"max_attempts": 3, "backoff_base": 5, "backoff_max": 5},  # the pause comes before a retry
        circuit_breaker=breaker(0.5, 1, 60),
    )
    client.send(name, "x", delay=0)
    paused = eventually(lambda: (q := client.get_queue(name)).paused and q)
    assert (paused.paused_reason, len(receiver.at(f"/{name}"))) == ("circuit_breaker", 1)
    table = run("queues", "get", name)
    assert "yes (circuit_breaker)" in table.stdout
    resumed = client.resume_queue(name)
    assert (resumed.paused, resumed.paused_reason) == (False, None)


def test_cli_queues_put_sets_a_breaker(run: Any, receiver: RawReceiver) -> None:
    name = fresh()
    put = run("--json", "queues", "put", name, "--target-url", receiver.url("/cli"), "--breaker", "0.25,10,120")
    assert json.loads(put.stdout)["circuit_breaker"] == {"failure_ratio": 0.25, "min_attempts": 10, "window": 120}


def test_cli_breaker_needs_three_values(run: Any) -> None:
    result = run("queues", "put", fresh(), "--target-url", "http://127.0.0.1:9/x", "--breaker", "0.5,20")
    assert (result.exit_code, "RATIO,MIN_ATTEMPTS,WINDOW" in result.output) == (2, True)


def test_cli_schedules_put_sets_catch_up_and_jitter(run: Any, client: Client, queue: str) -> None:
    put = run("--json", "schedules", "put", queue, "s", "--every", "3600", "--body", "{}", "--catch-up", "latest",
              "--jitter", "30")  # fmt: skip
    assert (json.loads(put.stdout)["catch_up"], json.loads(put.stdout)["jitter"]) == ("latest", 30)
    assert client.get_schedule(queue, "s").catch_up == "latest"


def test_cli_catch_up_accepts_only_the_three_policies(run: Any, queue: str) -> None:
    result = run("schedules", "put", queue, "s", "--every", "3600", "--body", "{}", "--catch-up", "some")
    assert result.exit_code == 2
