"""The asyncio client: every endpoint of `endpoints.Endpoints`, awaitable; each request runs in a worker
thread (`asyncio.to_thread`), so retries never block the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from hourglass_client.endpoints import Awaiting, Call, Endpoints
from hourglass_client.models import Attempt, Created, Operation

T = TypeVar("T")


class AsyncClient(Endpoints, Awaiting):
    """The same methods as `Client`, awaitable; `iter_*` are async iterators. `async with AsyncClient() as hg:`
    closes it."""

    async def run(self, call: Call[T]) -> T:
        return await asyncio.to_thread(call.run, self.transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    async def send_batch(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> list[Created]:
        """As `Client.send_batch`: in order, in requests of at most 100, each all or nothing."""
        return [created for call in self._creates(queue, messages) for created in await self.run(call)]

    async def attempts(self, queue: str, message_id: str) -> list[Attempt]:
        """As `Client.attempts`: every attempt of the message, in attempt order."""
        return [attempt async for attempt in self.iter_attempts(queue, message_id)][::-1]

    async def wait_operation(self, queue: str, operation_id: str, *, poll: float = 1.0) -> Operation:
        """Polls (sleeping on the event loop) until the operation is no longer `running`."""
        while True:
            operation = await self.get_operation(queue, operation_id)
            if operation.done:
                return operation
            await asyncio.sleep(poll)
