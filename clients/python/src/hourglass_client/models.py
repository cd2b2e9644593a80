"""Typed views of the API's documents; each keeps the full JSON document in `raw`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from hourglass_client.queue_settings import QueueSettings, settings_of

T = TypeVar("T")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 string as an aware datetime (`Z` accepted); None stays None."""
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime | str) -> str:
    """A datetime as RFC 3339 (naive datetimes are refused: the API needs an offset)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("deliver_at: a datetime needs a timezone (use datetime.now(UTC) or tz=...)")
    return value.isoformat()


@dataclass(frozen=True, kw_only=True)
class Queue(QueueSettings):
    """A queue document: its settings (each field of `QueueSettings`, as the server filled them in) and state."""

    name: str
    paused: bool
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    # Messages by status (v1.2); empty from a server without counts.
    counts: dict[str, int] = field(default_factory=dict, compare=False)
    # Why it is paused when it paused itself ("circuit_breaker"); None when running or paused by hand.
    paused_reason: str | None = None

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Queue:
        return cls(
            **settings_of(doc),
            name=str(doc.get("name", "")),
            paused=bool(doc.get("paused", False)),
            created_at=parse_time(doc.get("created_at")),
            raw=dict(doc),
            counts={str(k): int(v) for k, v in (doc.get("counts") or {}).items()},
            paused_reason=doc.get("paused_reason"),
        )


@dataclass(frozen=True)
class Created:
    """One entry of a create answer, in request order."""

    id: str
    due_at: datetime | None
    status: str
    duplicate: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Created:
        return cls(
            id=str(doc["id"]),
            due_at=parse_time(doc.get("due_at")),
            status=str(doc.get("status", "")),
            duplicate=bool(doc.get("duplicate", False)),
            raw=dict(doc),
        )


@dataclass(frozen=True)
class Message:
    id: str
    queue: str
    status: str
    body: Any
    created_at: datetime | None
    due_at: datetime | None
    expires_at: datetime | None
    attempts: int
    delivered_at: datetime | None
    last_error: str | None
    dedup_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    flow_key: str | None = None
    priority: int = 5
    # While pending, when a retry starts if not at due_at (v1.2).
    next_attempt_at: datetime | None = None
    window: dict[str, Any] | None = None  # its own delivery window (None: its queue's, if any)
    # When it reached its final status (delivered, failed, expired or cancelled); None while it is not finished.
    finished_at: datetime | None = None
    # On a queue with `ordering` (v1.3): the id of the message of its flow key it waits behind while due.
    blocked_by: str | None = None

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Message:
        return cls(
            id=str(doc["id"]),
            queue=str(doc.get("queue", "")),
            status=str(doc.get("status", "")),
            body=doc.get("body"),
            created_at=parse_time(doc.get("created_at")),
            due_at=parse_time(doc.get("due_at")),
            expires_at=parse_time(doc.get("expires_at")),
            attempts=int(doc.get("attempts") or 0),
            delivered_at=parse_time(doc.get("delivered_at")),
            last_error=doc.get("last_error"),
            dedup_id=doc.get("dedup_id"),
            raw=dict(doc),
            flow_key=doc.get("flow_key"),
            priority=int(doc.get("priority", 5)),
            next_attempt_at=parse_time(doc.get("next_attempt_at")),
            window=doc.get("window"),
            finished_at=parse_time(doc.get("finished_at")),
            blocked_by=doc.get("blocked_by"),
        )


@dataclass(frozen=True)
class KeyState:
    """One flow key of a queue with `ordering` (v1.3): the message at its head (None: none started or due), how
    many wait behind it, and whether it is held after a failure (`release_key` lets the next one start)."""

    flow_key: str
    head: str | None
    waiting: int
    held: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], flow_key: str = "") -> KeyState:
        """`flow_key` names the key when the answer does not."""
        named = doc.get("flow_key")
        return cls(
            flow_key=str(named) if named is not None else flow_key,
            head=doc.get("head"),
            waiting=int(doc.get("waiting") or 0),
            held=bool(doc.get("held", False)),
            raw=dict(doc),
        )


@dataclass(frozen=True)
class Attempt:
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    outcome: str
    status_code: int | None
    error: str | None
    retry_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Attempt:
        return cls(
            attempt=int(doc.get("attempt") or 0),
            started_at=parse_time(doc.get("started_at")),
            finished_at=parse_time(doc.get("finished_at")),
            outcome=str(doc.get("outcome", "")),
            status_code=doc.get("status_code"),
            error=doc.get("error"),
            retry_at=parse_time(doc.get("retry_at")),
            raw=dict(doc),
        )


@dataclass(frozen=True)
class Operation:
    id: str
    action: str
    filter: dict[str, Any]
    status: str
    matched: int
    applied: int
    skipped: int
    created_at: datetime | None
    finished_at: datetime | None
    error: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def done(self) -> bool:
        return self.status != "running"

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Operation:
        error = doc.get("error")
        return cls(
            id=str(doc["id"]),
            action=str(doc.get("action", "")),
            filter=dict(doc.get("filter") or {}),
            status=str(doc.get("status", "")),
            matched=int(doc.get("matched") or 0),
            applied=int(doc.get("applied") or 0),
            skipped=int(doc.get("skipped") or 0),
            created_at=parse_time(doc.get("created_at")),
            finished_at=parse_time(doc.get("finished_at")),
            error=error.get("message") if isinstance(error, dict) else error,
            raw=dict(doc),
        )


@dataclass(frozen=True)
class Schedule:
    name: str
    queue: str
    cron: str | None
    every: float | None
    timezone: str
    body: Any
    paused: bool
    next_due_at: list[datetime]
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    window: dict[str, Any] | None = None  # its occurrences' delivery window
    catch_up: str = "skip"  # which missed occurrences still run: skip, latest or all (v1.2)
    jitter: int = 0  # each occurrence delayed by up to this many seconds
    flow_key: str | None = None  # given to every occurrence (v1.2)
    priority: int = 5

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Schedule:
        upcoming = [parse_time(v) for v in doc.get("next_due_at") or []]
        return cls(
            name=str(doc.get("name", "")),
            queue=str(doc.get("queue", "")),
            cron=doc.get("cron"),
            every=doc.get("every"),
            timezone=str(doc.get("timezone") or "UTC"),
            body=doc.get("body"),
            paused=bool(doc.get("paused", False)),
            next_due_at=[t for t in upcoming if t is not None],
            created_at=parse_time(doc.get("created_at")),
            raw=dict(doc),
            window=doc.get("window"),
            catch_up=str(doc.get("catch_up") or "skip"),
            jitter=int(doc.get("jitter") or 0),
            flow_key=doc.get("flow_key"),
            priority=int(doc.get("priority", 5)),
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; pass `next_cursor` back to get the next (None: this was the last)."""

    items: list[T]
    next_cursor: str | None
