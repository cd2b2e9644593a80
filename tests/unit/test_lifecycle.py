"""The message status state machine."""

from __future__ import annotations

import pytest
from hourglass.core.lifecycle import can_cancel, can_edit, can_redeliver, can_transition
from hourglass.core.model import FINISHED, Status

FINISHED_STATES = [Status.DELIVERED, Status.FAILED, Status.CANCELLED, Status.EXPIRED]


@pytest.mark.parametrize("current", FINISHED_STATES)
def test_finished_states_go_nowhere_but_back_to_pending(current):
    assert [new for new in Status if can_transition(current, new)] == (
        [] if current is Status.CANCELLED else [Status.PENDING]
    )


@pytest.mark.parametrize(
    ("status", "allowed"), [(s, s in (Status.DELIVERED, Status.FAILED, Status.EXPIRED)) for s in Status]
)
def test_only_delivered_failed_or_expired_messages_redeliver(status, allowed):
    assert can_redeliver(status) is allowed


@pytest.mark.parametrize("status", FINISHED_STATES)
def test_finished_property(status):
    assert status.finished and status in FINISHED


@pytest.mark.parametrize("status", [Status.PENDING, Status.DELIVERING])
def test_active_states_are_not_finished(status):
    assert not status.finished


@pytest.mark.parametrize("new", [Status.DELIVERING, Status.CANCELLED, Status.EXPIRED, Status.PENDING, Status.FAILED])
def test_pending_transitions(new):
    assert can_transition(Status.PENDING, new)


def test_pending_cannot_jump_to_delivered():
    assert not can_transition(Status.PENDING, Status.DELIVERED)


@pytest.mark.parametrize("new", [Status.DELIVERED, Status.FAILED, Status.EXPIRED, Status.PENDING, Status.DELIVERING])
def test_delivering_transitions(new):
    assert can_transition(Status.DELIVERING, new)


@pytest.mark.parametrize(("status", "allowed"), [(s, s in (Status.PENDING, Status.CANCELLED)) for s in Status])
def test_cancel_only_from_pending_or_cancelled(status, allowed):
    assert can_cancel(status) is allowed


@pytest.mark.parametrize(("status", "allowed"), [(s, s is Status.PENDING) for s in Status])
def test_edit_only_while_pending(status, allowed):
    assert can_edit(status) is allowed
