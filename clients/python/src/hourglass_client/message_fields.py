"""A message's fields (contract v1, v1.1 and v1.2), declared once: `message`'s arguments, and so `send`'s,
derive from `MessageFields` below (the server's declaration is `hourglass.core.model.MessageFields`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ParamSpec

from hourglass_client.models import format_time

P = ParamSpec("P")


def _document(value: Mapping[str, Any]) -> dict[str, Any] | None:
    return dict(value) or None  # an empty document is no document


@dataclass(frozen=True, kw_only=True)
class MessageFields:
    """Every field of one message of a create request besides its body; None leaves it to the queue's or the
    server's default. A field's `doc` metadata turns its value into JSON."""

    delay: float | None = None
    deliver_at: datetime | str | None = field(default=None, metadata={"doc": format_time})
    # How to read a `deliver_at` without an offset: an IANA zone such as Europe/Paris.
    timezone: str | None = None
    ttl: float | None = None
    dedup_id: str | None = None
    target: Mapping[str, Any] | None = field(default=None, metadata={"doc": _document})
    # Flow control (v1.2): the key whose `flow_control` limits it shares; 0-9, 9 first when limits hold it back.
    flow_key: str | None = None
    priority: int | None = None
    # Its own delivery window (`windows.window`), replacing its queue's.
    window: Mapping[str, Any] | None = field(default=None, metadata={"doc": _document})


@dataclass(frozen=True)
class MessageEntry(MessageFields):
    """One message of a create request: its body and `MessageFields`."""

    body: Any

    def doc(self) -> dict[str, Any]:
        """The entry as sent: the body, and only the fields given."""
        doc = {"body": self.body}
        for f in fields(MessageFields):
            value = getattr(self, f.name)
            if value is not None and "doc" in f.metadata:
                value = f.metadata["doc"](value)
            if value is not None:
                doc[f.name] = value
        return doc


def _entries(build: Callable[P, MessageEntry]) -> Callable[P, dict[str, Any]]:
    def message(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """One entry of a create request (only the fields given are sent; `MessageFields` says what each means)."""
        return build(*args, **kwargs).doc()

    signature = inspect.signature(build).replace(return_annotation="dict[str, Any]")
    message.__signature__ = signature  # type: ignore[attr-defined]
    return message


message = _entries(MessageEntry)


def field_names() -> frozenset[str]:
    """The fields of a create request's message, its body included."""
    return frozenset(f.name for f in fields(MessageEntry))
