"""The message status state machine: which transitions are allowed."""

from __future__ import annotations

from hourglass.core.model import Status

S = Status
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.PENDING: frozenset({S.DELIVERING, S.CANCELLED, S.EXPIRED, S.PENDING, S.FAILED}),
    # delivering -> delivering is a takeover after the previous attempt's lease ran out
    S.DELIVERING: frozenset({S.DELIVERED, S.FAILED, S.EXPIRED, S.PENDING, S.DELIVERING, S.CANCELLED}),
    S.DELIVERED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
    S.EXPIRED: frozenset(),
}


def can_transition(current: Status, new: Status) -> bool:
    return new in TRANSITIONS[current]


def can_cancel(current: Status) -> bool:
    return current in (S.PENDING, S.CANCELLED)


def can_edit(current: Status) -> bool:
    return current is S.PENDING
