"""The asyncio client: each call of the sync `Client` runs in a worker thread (`asyncio.to_thread`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from hourglass_client.client import Client
from hourglass_client.models import Message, Operation, Page, Queue, Schedule

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _threaded(method: Callable[Concatenate[Client, P], R]) -> Callable[Concatenate[AsyncClient, P], Awaitable[R]]:
    async def call(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self.sync, *args, **kwargs)

    call.__doc__ = method.__doc__
    return call


class AsyncClient:
    """The same methods as `Client`, awaitable; `iter_*` are async iterators. Retries wait in the
    worker thread, never blocking the event loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sync = Client(*args, **kwargs)

    health = _threaded(Client.health)
    server_version = _threaded(Client.server_version)
    put_queue = _threaded(Client.put_queue)
    get_queue = _threaded(Client.get_queue)
    delete_queue = _threaded(Client.delete_queue)
    pause_queue = _threaded(Client.pause_queue)
    resume_queue = _threaded(Client.resume_queue)
    list_queues = _threaded(Client.list_queues)
    send = _threaded(Client.send)
    send_batch = _threaded(Client.send_batch)
    get_message = _threaded(Client.get_message)
    list_messages = _threaded(Client.list_messages)
    cancel = _threaded(Client.cancel)
    patch = _threaded(Client.patch)
    patch_doc = _threaded(Client.patch_doc)
    redeliver = _threaded(Client.redeliver)
    deliver_now = _threaded(Client.deliver_now)
    attempts = _threaded(Client.attempts)
    start_operation = _threaded(Client.start_operation)
    get_operation = _threaded(Client.get_operation)
    put_schedule = _threaded(Client.put_schedule)
    get_schedule = _threaded(Client.get_schedule)
    list_schedules = _threaded(Client.list_schedules)
    delete_schedule = _threaded(Client.delete_schedule)
    pause_schedule = _threaded(Client.pause_schedule)
    resume_schedule = _threaded(Client.resume_schedule)
    later_create = _threaded(Client.later_create)
    later_query = _threaded(Client.later_query)
    later_delete = _threaded(Client.later_delete)

    async def wait_operation(self, queue: str, operation_id: str, *, poll: float = 1.0) -> Operation:
        """Polls (sleeping on the event loop) until the operation is no longer `running`."""
        while True:
            operation = await self.get_operation(queue, operation_id)
            if operation.done:
                return operation
            await asyncio.sleep(poll)

    def iter_messages(
        self,
        queue: str,
        *,
        status: str | None = None,
        schedule: str | None = None,
        page_size: int | None = None,
        order: str | None = None,
        flow_key: str | None = None,
    ) -> AsyncIterator[Message]:
        return _pages(
            lambda cursor: self.list_messages(
                queue, status=status, schedule=schedule, limit=page_size, cursor=cursor, order=order, flow_key=flow_key
            )
        )

    def iter_queues(self, *, page_size: int | None = None) -> AsyncIterator[Queue]:
        return _pages(lambda cursor: self.list_queues(limit=page_size, cursor=cursor))

    def iter_schedules(self, queue: str, *, page_size: int | None = None) -> AsyncIterator[Schedule]:
        return _pages(lambda cursor: self.list_schedules(queue, limit=page_size, cursor=cursor))


async def _pages(fetch: Callable[[str | None], Awaitable[Page[T]]]) -> AsyncIterator[T]:
    cursor: str | None = None
    while True:
        page = await fetch(cursor)
        for item in page.items:
            yield item
        if not page.next_cursor or page.next_cursor == cursor:
            return
        cursor = page.next_cursor
