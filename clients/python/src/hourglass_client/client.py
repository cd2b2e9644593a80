"""The synchronous Hourglass client: every endpoint of `endpoints.Endpoints`, run blocking."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from hourglass_client.endpoints import Blocking, Call, Endpoints, message, new_dedup_id
from hourglass_client.models import Attempt, Created, Operation
from hourglass_client.queue_settings import breaker

T = TypeVar("T")

__all__ = ["Client", "breaker", "message", "new_dedup_id"]


class Client(Endpoints, Blocking):
    """Talks to one Hourglass API (see `Endpoints` for the arguments); `with Client() as hg:` closes it."""

    def run(self, call: Call[T]) -> T:
        return call.run(self.transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def send_batch(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> list[Created]:
        """Schedules messages (dicts as built by `message()`) in order, in requests of at most 100
        that fit the API's size limit. Each request is all or nothing; a failure raises after the
        earlier requests were stored (`send_batches` tells how many)."""
        return [created for stored in self.send_batches(queue, messages) for created in stored]

    def send_batches(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> Iterator[list[Created]]:
        """`send_batch` one request at a time: yields what each request stored, so that when one
        raises, the messages before it (and only those) are known to be stored."""
        for call in self._creates(queue, messages):
            yield self.run(call)

    def attempts(self, queue: str, message_id: str) -> list[Attempt]:
        """Every attempt of the message, in attempt order (a history longer than one response takes a request
        per page)."""
        return list(self.iter_attempts(queue, message_id))[::-1]

    def wait_operation(
        self, queue: str, operation_id: str, *, poll: float = 1.0, timeout: float | None = None
    ) -> Operation:
        """Polls until the operation is no longer `running` (TimeoutError after `timeout` s)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            operation = self.get_operation(queue, operation_id)
            if operation.done:
                return operation
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"operation {operation_id} still running after {timeout} s")
            self.sleep(poll)
