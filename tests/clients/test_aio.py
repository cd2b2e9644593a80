"""The asyncio client against the local runtime: concurrent sends, async paging."""

from __future__ import annotations

import asyncio

import pytest
from hourglass_client import AsyncClient, NotFound, targets

from tests.clients.conftest import API_KEY


def test_concurrent_sends_and_async_paging(api_url: str, queue: str) -> None:
    async def scenario() -> tuple[set[str], set[str]]:
        hg = AsyncClient(api_url, API_KEY)
        created = await asyncio.gather(*(hg.send(queue, {"n": n}, delay=600) for n in range(20)))
        listed = {m.id async for m in hg.iter_messages(queue, page_size=6)}
        return {c.id for c in created}, listed

    created, listed = asyncio.run(scenario())
    assert len(created) == 20 and listed == created


def test_errors_are_raised_from_the_awaited_call(api_url: str) -> None:
    with pytest.raises(NotFound):
        asyncio.run(AsyncClient(api_url, API_KEY).get_queue("no-such-queue-async"))


def test_a_target_builder_gives_the_message_its_aws_target(api_url: str, queue: str) -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:target-aio"

    async def scenario() -> dict[str, object] | None:
        hg = AsyncClient(api_url, API_KEY)
        created = await hg.send(queue, {"to": "sns"}, delay=600, target=targets.sns_topic(topic))
        return (await hg.get_message(queue, created.id)).raw.get("target")

    assert asyncio.run(scenario()) == {"type": "sns", "topic_arn": topic}


def test_async_order_due_and_deliver_now(api_url: str, queue: str) -> None:
    async def scenario() -> tuple[list[str], list[str], str]:
        hg = AsyncClient(api_url, API_KEY)
        late = await hg.send(queue, "late", delay=900)
        early = await hg.send(queue, "early", delay=600)
        listed = [m.id async for m in hg.iter_messages(queue, order="due")]
        moved = await hg.deliver_now(queue, late.id)
        return [early.id, late.id], listed, str(moved.status)

    expected, listed, status = asyncio.run(scenario())
    assert listed == expected and status == "pending"


def test_async_with_closes_the_client(api_url: str, queue: str) -> None:
    async def scenario() -> tuple[str, AsyncClient]:
        async with AsyncClient(api_url, API_KEY) as hg:
            name = (await hg.get_queue(queue)).name
        return name, hg

    name, closed = asyncio.run(scenario())
    assert (name, closed.transport.closed) == (queue, True)
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(closed.get_queue(queue))
