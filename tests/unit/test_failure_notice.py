"""The failure destination's notification document and its outbox keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.failure_notice import (
    OUTBOX_GRACE,
    OUTBOX_PK,
    failure_notice,
    notice_headers,
    notifies,
    outbox_keys,
    outbox_range,
)
from hourglass.core.model import Message, Status

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def message(status: Status) -> Message:
    return Message(
        id="m1",
        queue="orders",
        body={"n": 1},
        status=status,
        created_at=T0,
        due_at=T0,
        attempts=5,
        last_error="HTTP 503",
    )


def test_failed_message_notice_matches_the_contract():
    assert failure_notice(message(Status.FAILED), T0 + timedelta(seconds=9)) == {
        "event": "message.failed",
        "id": "m1",
        "queue": "orders",
        "status": "failed",
        "body": {"n": 1},
        "due_at": "2026-11-21T10:00:00.000Z",
        "attempts": 5,
        "last_error": "HTTP 503",
        "finished_at": "2026-11-21T10:00:09.000Z",
    }


def test_expired_message_has_the_expired_event():
    assert failure_notice(message(Status.EXPIRED), T0)["event"] == "message.expired"


@pytest.mark.parametrize("status", [Status.DELIVERED, Status.CANCELLED, Status.PENDING, Status.DELIVERING])
def test_other_statuses_do_not_notify(status):
    assert not notifies(status)
    with pytest.raises(ValueError):
        failure_notice(message(status), T0)


def test_http_notice_headers_name_the_event_and_message():
    headers = notice_headers(message(Status.FAILED))
    assert (headers["Hourglass-Event"], headers["Hourglass-Message-Id"]) == ("message.failed", "m1")


def test_an_outbox_entry_waits_out_the_writers_grace_and_sorts_by_it():
    keys = outbox_keys("abc", T0)
    low, high = outbox_range(T0 + OUTBOX_GRACE)
    early_low, early_high = outbox_range(T0 + OUTBOX_GRACE - timedelta(milliseconds=1))
    assert keys.pk == OUTBOX_PK and not keys.pk[0].isdigit()  # no due-bucket sweep reads it
    assert low <= keys.sk <= high and not early_low <= keys.sk <= early_high
