"""Redelivery of one finished message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.lifecycle import redeliver
from hourglass.core.model import Message, Status
from hourglass.core.redelivery import RedeliverRequest, redeliver_request
from hourglass.errors import ConflictError, ValidationError

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def finished(status: Status) -> Message:
    return Message(
        id="m1",
        queue="orders",
        body=1,
        status=status,
        created_at=T0,
        due_at=T0,
        version=7,
        expires_at=T0 + timedelta(minutes=5),
        attempts=5,
        delivered_at=T0 if status is Status.DELIVERED else None,
        last_error="HTTP 503",
    )


@pytest.mark.parametrize("status", [Status.FAILED, Status.EXPIRED, Status.DELIVERED])
def test_finished_message_becomes_pending_now_with_no_expiry(status):
    change = redeliver(finished(status), RedeliverRequest().due(NOW))
    message = change.message
    assert (message.status, message.due_at, message.expires_at, message.delivered_at) == (
        Status.PENDING,
        NOW,
        None,
        None,
    )
    assert (message.version, message.attempts, message.attempts_base, message.redelivered) == (8, 5, 5, True)
    assert (change.expected_version, change.expected_status, change.expire_at) == (7, status, None)


def test_redelivery_after_a_delay():
    assert redeliver(finished(Status.FAILED), RedeliverRequest(delay=10).due(NOW)).message.due_at == NOW + timedelta(
        seconds=10
    )


@pytest.mark.parametrize("status", [Status.PENDING, Status.DELIVERING, Status.CANCELLED])
def test_unfinished_or_cancelled_messages_conflict(status):
    with pytest.raises(ConflictError):
        redeliver(finished(status), NOW)


def test_request_body_is_optional():
    assert redeliver_request(None, NOW) == RedeliverRequest()


def test_request_reads_deliver_at():
    assert redeliver_request({"deliver_at": "2026-11-21T12:00:00+01:00"}, NOW) == RedeliverRequest(
        deliver_at=T0 + timedelta(hours=1)
    )


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": 1, "deliver_at": "2026-11-21T12:00:00Z"}, "delay"),
        ({"deliver_at": "soon"}, "deliver_at"),
        ({"deliver_at": "2046-11-21T12:00:00Z"}, "deliver_at"),
        ({"when": 1}, "when"),
        ([1], "body"),
    ],
)
def test_bad_requests_name_their_field(doc, field):
    with pytest.raises(ValidationError) as info:
        redeliver_request(doc, NOW)
    assert info.value.field == field
