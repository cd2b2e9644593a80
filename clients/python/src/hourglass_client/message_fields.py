"""A message's fields (contract v1, v1.1 and v1.2), declared once: `message`'s arguments (and so `send`'s) derive
from `MessageFields`, `put_schedule`'s from `SchedulePut`, both with `Carried`, what a message carries from its
request or its schedule. The server's declaration is `hourglass.core.model`'s; tests compare the two."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ParamSpec

from hourglass_client.models import format_time

P = ParamSpec("P")
# A field's `doc` metadata turns its value into JSON.
TIME = {"doc": format_time}
DOCUMENT = {"doc": lambda value: dict(value) or None}  # an empty document is no document


@dataclass(frozen=True, kw_only=True)
class Carried:
    """What a message carries, set on it or on its schedule for every occurrence; None: the queue's or the
    server's default."""

    target: Mapping[str, Any] | None = field(default=None, metadata=DOCUMENT)
    # Flow control (v1.2): the key whose `flow_control` limits it shares; 0-9, 9 first when limits hold it back.
    flow_key: str | None = None
    priority: int | None = None
    # Its own delivery window (`windows.window`), replacing its queue's.
    window: Mapping[str, Any] | None = field(default=None, metadata=DOCUMENT)


@dataclass(frozen=True, kw_only=True)
class MessageFields(Carried):
    """Every field of one message of a create request besides its body."""

    delay: float | None = None
    deliver_at: datetime | str | None = field(default=None, metadata=TIME)
    # How to read a `deliver_at` without an offset: an IANA zone such as Europe/Paris.
    timezone: str | None = None
    ttl: float | None = None
    dedup_id: str | None = None


def given(item: Carried) -> dict[str, Any]:
    """The fields of `item` that were given (not None), as JSON."""
    doc = {}
    for f in fields(item):
        value = getattr(item, f.name)
        if value is not None and "doc" in f.metadata:
            value = f.metadata["doc"](value)
        if value is not None:
            doc[f.name] = value
    return doc


@dataclass(frozen=True)
class MessageEntry(MessageFields):
    """One message of a create request: its body (sent even when None: a JSON null) and `MessageFields`."""

    body: Any

    def doc(self) -> dict[str, Any]:
        return {"body": self.body, **given(self)}


@dataclass(frozen=True, kw_only=True)
class SchedulePut(Carried):
    """Every field of `PUT /v1/queues/{queue}/schedules/{name}`: exactly one of `cron` and `every`. `catch_up`
    (`skip`, `latest` or `all`) says which occurrences missed while paused or down still run; `jitter` delays each
    occurrence by up to that many seconds, never early."""

    cron: str | None = None
    every: float | None = None
    timezone: str | None = None
    body: Any = None
    start_at: datetime | str | None = field(default=None, metadata=TIME)
    end_at: datetime | str | None = field(default=None, metadata=TIME)
    catch_up: str | None = None
    jitter: int | None = None

    def doc(self) -> dict[str, Any]:
        return given(self)


def _entries(build: Callable[P, MessageEntry]) -> Callable[P, dict[str, Any]]:
    def message(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """One entry of a create request (only the fields given are sent; `MessageFields` says what each means)."""
        return build(*args, **kwargs).doc()

    signature = inspect.signature(build).replace(return_annotation="dict[str, Any]")
    message.__signature__ = signature  # type: ignore[attr-defined]
    return message


message = _entries(MessageEntry)


def names(kind: type[Carried]) -> frozenset[str]:
    """The fields of a request of `kind` (`MessageEntry`, `SchedulePut`)."""
    return frozenset(f.name for f in fields(kind))
