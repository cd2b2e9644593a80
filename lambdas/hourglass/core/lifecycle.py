"""The message status state machine: which transitions are allowed, and each one as a new version.

Every transition returns a `Change`: the new message, the preconditions its write must meet and, for one
that ends the message, how long it is kept. `service.transitions` writes them with their side effects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.core.attempts import Attempt
from hourglass.core.model import Message, Status, past_expiry
from hourglass.errors import ConflictError

S = Status
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.PENDING: frozenset({S.DELIVERING, S.CANCELLED, S.EXPIRED, S.PENDING, S.FAILED}),
    # delivering -> delivering is a takeover after the previous attempt's lease ran out
    S.DELIVERING: frozenset({S.DELIVERED, S.FAILED, S.EXPIRED, S.PENDING, S.DELIVERING, S.CANCELLED}),
    # finished -> pending is a redelivery (`redeliver`); a cancelled message stays cancelled
    S.DELIVERED: frozenset({S.PENDING}),
    S.FAILED: frozenset({S.PENDING}),
    S.CANCELLED: frozenset(),
    S.EXPIRED: frozenset({S.PENDING}),
}


def can_transition(current: Status, new: Status) -> bool:
    return new in TRANSITIONS[current]


def can_cancel(current: Status) -> bool:
    return current in (S.PENDING, S.CANCELLED)


def can_edit(current: Status) -> bool:
    return current is S.PENDING


def can_redeliver(current: Status) -> bool:
    return current.finished and can_transition(current, S.PENDING)


@dataclass(frozen=True)
class Change:
    """A new message version; its write succeeds only over `expected_version` in `expected_status`."""

    message: Message
    expected_version: int
    expected_status: Status
    # Finished messages stay this long, then TTL removes them.
    expire_at: datetime | None = None

    def leased(self, lease: datetime | None) -> Change:
        return replace(self, message=replace(self.message, claimed_until=lease))


@dataclass(frozen=True)
class DeliveryStart:
    """pending(`version`) -> delivering, or a takeover of a delivering message whose lease ended by `now`."""

    version: int
    now: datetime
    lease_until: datetime


def _change(message: Message, retention: timedelta | None = None, now: datetime | None = None, **fields: Any) -> Change:
    # A new version owes no notice of its own yet: the outbox writes one on the version that ends.
    new = replace(message, version=message.version + 1, notice=None, **fields)
    if not can_transition(message.status, new.status):
        raise ValueError(f"no transition from {message.status.value} to {new.status.value}")
    new = replace(new, finished_at=_finished_at(new, now))
    # Only a version that ends the message is kept for `retention`, then TTL removes it.
    expire_at = now + retention if new.status.finished and retention is not None and now is not None else None
    return Change(new, message.version, message.status, expire_at)


def _finished_at(message: Message, now: datetime | None) -> datetime | None:
    """The time a version that ends the message keeps of its ending, when nothing else dates it: a delivered
    one has `delivered_at`, one ended by an attempt that attempt's end (`final_attempt`). It rides on the write
    that ends the message, within the headroom an inline item keeps (`body_placement`): no added write unit."""
    if not message.status.finished or message.delivered_at is not None or message.final_attempt is not None:
        return None
    return now


def cancel(message: Message, now: datetime, retention: timedelta) -> Change:
    return _change(message, retention, now, status=S.CANCELLED, claimed_until=None)


def reschedule(
    message: Message,
    *,
    due: datetime,
    body: Any,
    now: datetime | None = None,
    retention: timedelta | None = None,
    scheduled: datetime | None = None,
) -> Change:
    """A pending message with a new due time or body; due after its expiry, it expires instead (and is
    kept for `retention` from `now`). `scheduled`: the time asked for, when its delivery window moved
    `due` to an opening."""
    status = S.EXPIRED if past_expiry(message.expires_at, due) else S.PENDING
    kept = scheduled_at(scheduled, due)
    return _change(message, retention, now, body=body, due_at=due, scheduled_at=kept, status=status, claimed_until=None)


def scheduled_at(scheduled: datetime | None, due: datetime) -> datetime | None:
    """What a version stores as the time it was scheduled for: None when that is its due time."""
    return None if scheduled is None or scheduled == due else scheduled


def begin_delivery(version: int, now: datetime, lease: timedelta) -> DeliveryStart:
    return DeliveryStart(version, now, now + lease)


def await_retry(message: Message, retry_at: datetime, error: str | None) -> Change:
    """A failed attempt waits as pending for its retry at `retry_at`; it stays scheduled for its own time."""
    return _change(
        message,
        status=S.PENDING,
        due_at=retry_at,
        scheduled_at=message.scheduled,
        last_error=error,
        claimed_until=None,
    )


def put_back(message: Message, due: datetime | None = None) -> Change:
    """An attempt begun but not started (its pacing slot passed, or its delivery window closed, meanwhile):
    pending again, due as before or at `due`, with the attempt it counted given back (no attempt happened,
    none is recorded)."""
    due_at = message.due_at if due is None else due
    return _change(
        message,
        status=S.PENDING,
        due_at=due_at,
        scheduled_at=scheduled_at(message.scheduled, due_at),
        attempts=max(0, message.attempts - 1),
        claimed_until=None,
    )


def redeliver(message: Message, due: datetime, scheduled: datetime | None = None) -> Change:
    """finished -> pending, due at `due`: no expiry, a fresh retry budget (counted from the attempts so far),
    and delivered even if its schedule has moved on since (an explicit request); 409 unless finished."""
    if not can_redeliver(message.status):
        raise ConflictError(f"message is {message.status.value}; only delivered, failed or expired ones redeliver")
    return _change(
        message,
        status=S.PENDING,
        due_at=due,
        scheduled_at=scheduled_at(scheduled, due),
        expires_at=None,
        delivered_at=None,
        claimed_until=None,
        final_attempt=None,
        attempts_base=message.attempts,
        redelivered=True,
    )


def finish(
    message: Message,
    status: Status,
    now: datetime,
    retention: timedelta,
    *,
    error: str | None,
    delivered_at: datetime | None = None,
    attempt: Attempt | None = None,
) -> Change:
    """The message ends in `status`; `attempt`, the attempt that ended it, rides on the same write. A
    delivered message has no last error (its attempt history keeps each one)."""
    last_error = error if status is not S.DELIVERED else None
    return _change(
        message,
        retention,
        now,
        status=status,
        last_error=last_error,
        delivered_at=delivered_at,
        claimed_until=None,
        final_attempt=attempt,
    )
