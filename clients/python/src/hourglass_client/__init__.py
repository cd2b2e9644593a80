"""Hourglass client: a typed SDK for the delay queue's REST API, and the `hourglass` CLI."""

from hourglass_client import targets
from hourglass_client.aio import AsyncClient
from hourglass_client.client import Client, breaker, message, new_dedup_id
from hourglass_client.errors import (
    BadRequest,
    Conflict,
    HourglassError,
    NotFound,
    RateLimited,
    TransportError,
    Unauthorized,
    Unavailable,
)
from hourglass_client.models import Attempt, Created, KeyState, Message, Operation, Page, Queue, Schedule
from hourglass_client.queue_settings import QueueSettings, ordering
from hourglass_client.signing import sign, verify
from hourglass_client.transport import RetryPolicy
from hourglass_client.version import __version__
from hourglass_client.windows import parse_window, window

__all__ = [
    "AsyncClient",
    "Attempt",
    "BadRequest",
    "Client",
    "Conflict",
    "Created",
    "HourglassError",
    "KeyState",
    "Message",
    "NotFound",
    "Operation",
    "Page",
    "Queue",
    "QueueSettings",
    "RateLimited",
    "RetryPolicy",
    "Schedule",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "__version__",
    "breaker",
    "message",
    "new_dedup_id",
    "ordering",
    "parse_window",
    "sign",
    "targets",
    "verify",
    "window",
]
