"""Makes the embedded moto as atomic as the services: one DynamoDB write and one SQS receive at a time.

moto serves requests in threads, but checks a write's condition and applies it in two steps, and
checks a message's visibility and marks it received in two steps: two concurrent requests could
both succeed where DynamoDB and SQS let exactly one (one message begun twice, one timer received by
two pollers). Its queries also fail now and then when a write changes the table under them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.sqs import models as sqs

# Reentrant: a transaction applies its writes through the same backend methods.
TABLE_LOCK = threading.RLock()
RECEIVE_LOCK = threading.Lock()
_TABLE_OPERATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "query", "scan")


def _holding(lock: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    locked.__dict__["atomic"] = True
    return locked


def _waiting_without(wait: Callable[..., None]) -> Callable[..., None]:
    """A long poll waits outside RECEIVE_LOCK, so that one waiting receive holds up no other."""

    @functools.wraps(wait)
    def waiting(queue: Any, timeout: float) -> None:
        RECEIVE_LOCK.release()
        try:
            wait(queue, timeout)
        finally:
            RECEIVE_LOCK.acquire()

    return waiting


def install() -> None:
    """Idempotent: the methods are wrapped once per process."""
    if getattr(DynamoDBBackend.update_item, "atomic", False):
        return
    for name in _TABLE_OPERATIONS:
        setattr(DynamoDBBackend, name, _holding(TABLE_LOCK, getattr(DynamoDBBackend, name)))
    # wait_for_messages is only called from inside receive_message, with the lock held.
    backend: Any = sqs.SQSBackend
    backend.receive_message = _holding(RECEIVE_LOCK, backend.receive_message)
    queue: Any = sqs.Queue
    queue.wait_for_messages = _waiting_without(queue.wait_for_messages)
