"""What a delivery sends and how the answer is judged."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import hourglass_client
import pytest
from hourglass.core import delivery
from hourglass.core.model import Message, Status

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MESSAGE = Message(
    id="0123abcd",
    queue="orders",
    body={"order": 42, "note": "é"},
    status=Status.DELIVERING,
    created_at=NOW - timedelta(minutes=5),
    due_at=datetime(2026, 11, 21, 10, 0, 0, 250000, tzinfo=UTC),
    topic="order",
)


# --- judge_http ------------------------------------------------------------------------------
def test_the_response_body_kept_is_its_first_kib() -> None:
    outcome = delivery.judge_http(500, None, NOW, b"e" * 5000)
    assert outcome.response == "e" * delivery.MAX_RESPONSE


def test_the_response_body_keeps_line_breaks_and_escapes_other_control_characters() -> None:
    outcome = delivery.judge_http(400, None, NOW, b"line 1\nline\t2\x1b[31m\xff")
    assert outcome.response == "line 1\nline\t2\\x1b[31m\ufffd"


def test_an_empty_response_body_is_none() -> None:
    assert delivery.judge_http(204, None, NOW, b"").response is None


def test_a_response_of_wide_characters_stays_within_its_bytes() -> None:
    outcome = delivery.Outcome(True, response="😀" * 1000)
    assert outcome.response is not None and len(outcome.response.encode()) <= delivery.MAX_RESPONSE




@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_is_delivered(status):
    assert delivery.judge_http(status, None, NOW).delivered


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
def test_retryable_statuses(status):
    outcome = delivery.judge_http(status, None, NOW)
    assert (outcome.delivered, outcome.retryable) == (False, True)
    assert str(status) in outcome.error


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 413, 422, 451, 300, 302])
def test_other_statuses_fail_permanently(status):
    outcome = delivery.judge_http(status, None, NOW)
    assert (outcome.delivered, outcome.retryable) == (False, False)


def test_retry_after_seconds_are_passed_on():
    assert delivery.judge_http(503, "120", NOW).retry_after == 120.0


def test_retry_after_http_date_is_converted_to_seconds():
    assert delivery.judge_http(429, "Sat, 21 Nov 2026 10:01:30 GMT", NOW).retry_after == 90.0


def test_retry_after_in_the_past_is_zero():
    assert delivery.retry_after_seconds("Sat, 21 Nov 2026 09:00:00 GMT", NOW) == 0.0


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "1.5", "²", "Wed, 31 Feb 2026 07:28:00 GMT"])
def test_unusable_retry_after_is_ignored(header):
    assert delivery.retry_after_seconds(header, NOW) is None


def test_retry_after_is_ignored_for_permanent_failures():
    assert delivery.judge_http(400, "60", NOW).retry_after is None


def test_transport_failure_is_retryable_and_truncated():
    outcome = delivery.transport_failure("x" * 1000)
    assert (outcome.delivered, outcome.retryable, len(outcome.error)) == (False, True, 500)


def test_an_error_keeps_no_control_characters_from_the_reply():
    outcome = delivery.transport_failure("BadStatusLine: \x1b]0;owned\x07\x9b2J ok\r\n")
    assert outcome.error == "BadStatusLine: \\x1b]0;owned\\x07\\x9b2J ok"


def test_a_later_reply_with_a_huge_code_gives_a_bounded_error():
    outcome = delivery.judge_later(200, json.dumps({"code": "x" * 100_000}).encode())
    assert (outcome.retryable, len(outcome.error)) == (True, 500)


# --- judge_later -----------------------------------------------------------------------------


def test_later_code_100_is_delivered():
    assert delivery.judge_later(200, b'{"code": 100, "msg": "ok"}').delivered


def test_later_code_101_is_retried():
    outcome = delivery.judge_later(200, b'{"code": 101}')
    assert (outcome.delivered, outcome.retryable) == (False, True)


@pytest.mark.parametrize("body", [b"ok", b"", b"[100]", b'{"code": "100"}', b'{"status": 100}', b"\xff", b"[" * 100000])
def test_later_anything_else_is_retried(body):
    outcome = delivery.judge_later(200, body)
    assert (outcome.delivered, outcome.retryable) == (False, True)


def test_later_code_100_with_error_status_still_counts_as_the_reply():
    assert delivery.judge_later(500, b'{"code": 100}').delivered


def test_later_request_shape():
    assert json.loads(delivery.later_request(MESSAGE)) == {"id": "0123abcd", "topic": "order", "content": MESSAGE.body}


# --- http_request ----------------------------------------------------------------------------


def test_http_request_body_is_the_message_body():
    body, _ = delivery.http_request(MESSAGE, 1, headers={}, secrets=(), now=NOW)
    assert json.loads(body) == MESSAGE.body


def test_http_request_carries_hourglass_headers():
    _, headers = delivery.http_request(MESSAGE, 3, headers={}, secrets=(), now=NOW)
    assert headers["Hourglass-Message-Id"] == "0123abcd"
    assert headers["Hourglass-Queue"] == "orders"
    assert headers["Hourglass-Attempt"] == "3"
    assert headers["Hourglass-Due-At"] == "2026-11-21T10:00:00.250Z"
    assert headers["Content-Type"] == "application/json"


def test_http_request_has_no_signature_without_a_secret():
    _, headers = delivery.http_request(MESSAGE, 1, headers={}, secrets=(), now=NOW)
    assert "Hourglass-Signature" not in headers


def test_http_request_signature_verifies_with_the_secret():
    body, headers = delivery.http_request(MESSAGE, 1, headers={}, secrets=("s3cret",), now=NOW)
    assert hourglass_client.verify(headers, body, "s3cret", now=int(NOW.timestamp()))


def test_http_request_signature_timestamp_is_now():
    _, headers = delivery.http_request(MESSAGE, 1, headers={}, secrets=("s3cret",), now=NOW)
    assert headers["Hourglass-Signature"].startswith(f"t={int(NOW.timestamp())},v1=")


def test_http_request_keeps_target_headers():
    _, headers = delivery.http_request(MESSAGE, 1, headers={"X-Token": "abc"}, secrets=(), now=NOW)
    assert headers["X-Token"] == "abc"


# --- sqs_envelope ----------------------------------------------------------------------------


def test_sqs_envelope_shape():
    assert json.loads(delivery.sqs_envelope(MESSAGE, 2)) == {
        "id": "0123abcd",
        "queue": "orders",
        "body": {"order": 42, "note": "é"},
        "due_at": "2026-11-21T10:00:00.250Z",
        "attempt": 2,
    }


def test_an_outcome_error_is_bounded_whatever_a_later_callback_answers():
    outcome = delivery.judge_later(200, json.dumps({"code": "x" * 500_000}).encode())
    assert outcome.error is not None and len(outcome.error) == delivery.MAX_ERROR
