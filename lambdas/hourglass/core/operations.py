"""Bulk operations: the request (action, filter), the operation document, and what each action does to a message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from hourglass.core import validation
from hourglass.core.keys import message_range
from hourglass.core.model import Status
from hourglass.core.timestamps import format_rfc3339, parse_rfc3339
from hourglass.errors import ValidationError

# A queue's messages are read in this many id ranges (ids are random hex), each with its own cursor.
SEGMENTS = 16
MAX_SHIFT = validation.MAX_HORIZON
# A segment whose worker has recorded no page for this long is taken to be dead (crashed, timed out, or its
# re-invocation lost) and is restarted from its cursor. Longer than any page takes, so that a live worker is
# hardly ever doubled; when it is, the cursor's compare-and-set stops one of the two.
WORKER_LEASE = timedelta(minutes=5)


class Action(StrEnum):
    CANCEL = "cancel"
    REDELIVER = "redeliver"
    SHIFT = "shift"


class Verdict(StrEnum):
    APPLY = "apply"
    SKIP = "skip"


class OperationStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# The statuses each action applies to; a message in any other status is left alone.
APPLIES_TO: dict[Action, frozenset[Status]] = {
    Action.CANCEL: frozenset({Status.PENDING}),
    Action.REDELIVER: frozenset({Status.FAILED, Status.EXPIRED}),
    Action.SHIFT: frozenset({Status.PENDING}),
}


def verdict(action: Action, status: Status) -> Verdict:
    """Whether `action` changes a message now in `status`; a skip counts in `skipped`."""
    return Verdict.APPLY if status in APPLIES_TO[action] else Verdict.SKIP


@dataclass(frozen=True)
class OperationFilter:
    status: Status | None = None
    due_after: datetime | None = None
    due_before: datetime | None = None

    def statuses(self, action: Action) -> frozenset[Status]:
        """The statuses an operation reads: the filter's, or every one the action applies to."""
        return APPLIES_TO[action] if self.status is None else frozenset({self.status})

    def matches(self, action: Action, status: Status, due_at: datetime) -> bool:
        if status not in self.statuses(action):
            return False
        if self.due_after is not None and due_at <= self.due_after:
            return False
        return self.due_before is None or due_at < self.due_before


@dataclass(frozen=True)
class OperationRequest:
    action: Action
    filter: OperationFilter
    seconds: float | None = None


@dataclass(frozen=True)
class Progress:
    matched: int = 0
    applied: int = 0
    skipped: int = 0

    def __add__(self, other: Progress) -> Progress:
        return Progress(self.matched + other.matched, self.applied + other.applied, self.skipped + other.skipped)


class MessageResult(StrEnum):
    APPLIED = "applied"
    SKIPPED = "skipped"  # its status changed before the write (or it no longer matches)
    ALREADY_APPLIED = "already_applied"  # a redone page: the message carries this operation's `last_op`


def tally(results: Iterable[MessageResult]) -> Progress:
    """One page's counts: every message read counts as matched; a redone page counts its own work once."""
    outcomes = list(results)
    applied = sum(r is not MessageResult.SKIPPED for r in outcomes)
    return Progress(matched=len(outcomes), applied=applied, skipped=len(outcomes) - applied)


@dataclass(frozen=True)
class Operation:
    id: str
    queue: str
    request: OperationRequest
    created_at: datetime
    status: OperationStatus = OperationStatus.RUNNING
    progress: Progress = Progress()
    finished_at: datetime | None = None
    error: str | None = None

    def finish(self, now: datetime, error: str | None = None) -> Operation:
        status = OperationStatus.FAILED if error else OperationStatus.SUCCEEDED
        return replace(self, status=status, finished_at=now, error=error)


@dataclass(frozen=True)
class Workers:
    """Where a running operation's segments stand: those still to do, and when each last recorded a page
    (or was restarted); a segment with no beat yet counts from the operation's creation."""

    remaining: frozenset[int]
    beats: Mapping[int, datetime]

    def stale(self, created_at: datetime, now: datetime, lease: timedelta = WORKER_LEASE) -> list[int]:
        """The segments still to do whose worker has been silent for longer than `lease`."""
        return sorted(seg for seg in self.remaining if self.beats.get(seg, created_at) + lease <= now)


def _time(doc: Mapping[str, Any], key: str) -> datetime | None:
    value = doc.get(key)
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"filter.{key}", "must be an RFC 3339 date-time with an offset") from exc


def _filter(action: Action, value: object) -> OperationFilter:
    if not isinstance(value, dict):
        raise ValidationError("filter", "must be a JSON object")
    for key in value:
        if key not in ("status", "due_after", "due_before"):
            raise ValidationError(f"filter.{key}", "is not a known field")
    raw_status = value.get("status")
    allowed = sorted(s.value for s in APPLIES_TO[action])
    if raw_status is not None and raw_status not in allowed:
        raise ValidationError("filter.status", f"{action.value} applies only to {' or '.join(allowed)} messages")
    after, before = _time(value, "due_after"), _time(value, "due_before")
    if after is not None and before is not None and after >= before:
        raise ValidationError("filter.due_before", "must be later than filter.due_after")
    return OperationFilter(None if raw_status is None else Status(raw_status), after, before)


def operation_request(doc: object) -> OperationRequest:
    """`POST .../operations`; bad input raises ValidationError naming the field."""
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a JSON object")
    for key in doc:
        if key not in ("action", "filter", "seconds"):
            raise ValidationError(key, "is not a known field")
    raw_action = doc.get("action")
    # Not a set lookup: an unhashable value (a JSON object or list) must be a 400 like any other.
    if not isinstance(raw_action, str) or raw_action not in {a.value for a in Action}:
        raise ValidationError("action", 'must be "cancel", "redeliver" or "shift"')
    action = Action(raw_action)
    seconds = None
    if action is Action.SHIFT:
        seconds = validation.number(doc.get("seconds"), "seconds", low=-MAX_SHIFT, high=MAX_SHIFT)
    elif "seconds" in doc:
        raise ValidationError("seconds", "is only for the shift action")
    return OperationRequest(action, _filter(action, doc.get("filter", {})), seconds)


def shifted_due(due_at: datetime, seconds: float, now: datetime) -> datetime:
    """A shifted due time: moved by `seconds`, never earlier than now."""
    return max(now, due_at + timedelta(seconds=seconds))


def segment_bounds(segment: int) -> tuple[str, str]:
    """Inclusive sort-key range of one segment of a queue's messages (ids start with a hex digit)."""
    if not 0 <= segment < SEGMENTS:
        raise ValueError("no such segment")
    return message_range(f"{segment:x}")


def _time_or_none(value: datetime | None) -> str | None:
    return None if value is None else format_rfc3339(value)


def filter_doc(operation_filter: OperationFilter) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if operation_filter.status is not None:
        doc["status"] = operation_filter.status.value
    if operation_filter.due_after is not None:
        doc["due_after"] = format_rfc3339(operation_filter.due_after)
    if operation_filter.due_before is not None:
        doc["due_before"] = format_rfc3339(operation_filter.due_before)
    return doc


def operation_doc(operation: Operation) -> dict[str, Any]:
    request = operation.request
    doc: dict[str, Any] = {
        "id": operation.id,
        "queue": operation.queue,
        "action": request.action.value,
        "filter": filter_doc(request.filter),
    }
    if request.seconds is not None:
        doc["seconds"] = int(request.seconds) if request.seconds.is_integer() else request.seconds
    doc.update(
        status=operation.status.value,
        matched=operation.progress.matched,
        applied=operation.progress.applied,
        skipped=operation.progress.skipped,
        created_at=format_rfc3339(operation.created_at),
        finished_at=_time_or_none(operation.finished_at),
    )
    if operation.error is not None:
        doc["error"] = operation.error
    return doc
