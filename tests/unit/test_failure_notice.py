"""The failure destination's notification document and its outbox keys."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core import delivery, keys, limits
from hourglass.core.delivery import Outcome, judge_http
from hourglass.core.failure_notice import (
    BACKOFF_MAX,
    MAX_TRIES,
    OUTBOX_GRACE,
    after_failure,
    backoff,
    failure_notice,
    fair_order,
    notice_headers,
    notice_text,
    notifies,
    outbox_keys,
    outbox_range,
)
from hourglass.core.handoff import DueEntry
from hourglass.core.model import HttpTarget, Message, NoticeStatus, SqsTarget, Status

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
    entry = outbox_keys("abc", T0)
    low, high = outbox_range(T0 + OUTBOX_GRACE)
    early_low, early_high = outbox_range(T0 + OUTBOX_GRACE - timedelta(milliseconds=1))
    assert entry.pk in keys.outbox_pks() and not entry.pk[0].isdigit()  # no due-bucket sweep reads it
    assert low <= entry.sk <= high and not early_low <= entry.sk <= early_high


# next tries --------------------------------------------------------------------------------------
def test_backoff_doubles_from_the_grace_up_to_its_ceiling_with_at_most_a_quarter_more():
    for tries in range(1, 15):
        base = min(BACKOFF_MAX, OUTBOX_GRACE * 2 ** (tries - 1))
        assert base <= backoff("m1", tries) <= base * 1.25


def test_backoff_jitter_spreads_the_notices_of_one_outage():
    assert len({backoff(f"m{i}", 3) for i in range(20)}) > 10


def test_a_transient_failure_waits_its_backoff():
    notice = after_failure("m1", 2, judge_http(503, None, T0), T0, T0)
    assert (notice.status, notice.tries, notice.last_error) == (NoticeStatus.PENDING, 2, "HTTP 503")
    assert notice.next_try_at == T0 + backoff("m1", 2)


def test_a_retry_after_longer_than_the_backoff_is_honoured_up_to_the_ceiling():
    assert after_failure("m1", 1, judge_http(429, "600", T0), T0, T0).next_try_at == T0 + timedelta(seconds=600)
    capped = after_failure("m1", 1, judge_http(429, "86400", T0), T0, T0)
    assert capped.next_try_at == T0 + BACKOFF_MAX


@pytest.mark.parametrize("status", [400, 404, 410, 413])
def test_a_permanent_refusal_gives_up_at_once(status):
    notice = after_failure("m1", 1, judge_http(status, None, T0), T0, T0)
    assert (notice.status, notice.next_try_at) == (NoticeStatus.ABANDONED, None)


def test_the_last_try_gives_up_even_a_transient_failure():
    failure = Outcome(False, retryable=True, error="timed out")
    assert after_failure("m1", MAX_TRIES - 1, failure, T0, T0).status is NoticeStatus.PENDING
    assert after_failure("m1", MAX_TRIES, failure, T0, T0).status is NoticeStatus.ABANDONED


def test_the_tries_of_a_notice_span_a_few_hours():
    total = sum((backoff("m1", tries) for tries in range(1, MAX_TRIES)), timedelta())
    assert timedelta(hours=3) < total < timedelta(hours=6)


# fairness ----------------------------------------------------------------------------------------
def test_due_entries_are_taken_in_turn_from_each_queue_earliest_first():
    entries = [DueEntry("a", f"a{i}", 2, i) for i in range(4)] + [DueEntry("b", "b0", 2, 9), DueEntry("c", "c0", 2, 10)]
    assert [e.id for e in fair_order(entries)] == ["a0", "b0", "c0", "a1", "a2", "a3"]


SQS_DESTINATION = SqsTarget("https://sqs.us-east-1.amazonaws.com/123456789012/failures")
FULL_BODY = "x" * (256 * 1024 - 2)


def test_a_notice_that_fits_an_sqs_destination_carries_the_body():
    sent = json.loads(notice_text(message(Status.FAILED), T0, SQS_DESTINATION))
    assert (sent["body"], "body_omitted" in sent) == ({"n": 1}, False)


def test_a_notice_too_large_for_an_sqs_destination_goes_without_the_body():
    text = notice_text(replace(message(Status.FAILED), body=FULL_BODY), T0, SQS_DESTINATION)
    sent = json.loads(text)
    assert (sent["id"], sent["body"], sent["body_omitted"]) == ("m1", None, True)
    assert limits.sqs_message_bytes(text) <= limits.SQS_MESSAGE_BYTES


def test_an_http_destination_gets_the_whole_body():
    text = notice_text(replace(message(Status.FAILED), body=FULL_BODY), T0, HttpTarget("https://example.com/"))
    assert json.loads(text)["body"] == FULL_BODY


def test_the_largest_notice_without_its_body_fits_an_sqs_destination():
    largest = replace(
        message(Status.EXPIRED),
        id="f" * 64,
        queue="q" * 64,
        body="x" * limits.SQS_MESSAGE_BYTES,
        attempts=10**10,
        last_error="\x01" * delivery.MAX_ERROR,
    )
    text = notice_text(largest, T0, SQS_DESTINATION)
    assert json.loads(text)["body_omitted"] and limits.sqs_message_bytes(text) <= limits.SQS_MESSAGE_BYTES
