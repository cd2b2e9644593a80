"""Attempt history records: keys, documents and invariants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core import attempts
from hourglass.core.attempts import (
    MAX_ERROR,
    Attempt,
    AttemptOutcome,
    history_doc,
)
from hourglass.core.keys import MESSAGE_PREFIX, history_key, history_prefix

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_history_keys_sort_attempts_numerically_and_share_the_message_prefix():
    keys = [history_key("abc", n) for n in (1, 2, 10, 100, 1000)]
    assert keys == sorted(keys)
    assert all(key.startswith(history_prefix("abc")) for key in keys)


def test_history_keys_never_fall_in_the_message_range():
    assert not history_key("abc", 1).startswith(MESSAGE_PREFIX)


def test_history_prefix_of_one_message_does_not_match_another_with_a_longer_id():
    assert not history_key("abcd", 1).startswith(history_prefix("abc"))


def test_document_matches_the_contract():
    retry = Attempt(
        "m1", 1, T0, T0 + timedelta(seconds=1), AttemptOutcome.RETRY, 503, "HTTP 503", T0 + timedelta(seconds=3)
    )
    done = Attempt("m1", 2, T0 + timedelta(seconds=3), T0 + timedelta(seconds=4), AttemptOutcome.DELIVERED, 200)
    assert history_doc([done, retry]) == {
        "attempts": [
            {
                "attempt": 1,
                "started_at": "2026-11-21T10:00:00.000Z",
                "finished_at": "2026-11-21T10:00:01.000Z",
                "outcome": "retry",
                "status_code": 503,
                "error": "HTTP 503",
                "retry_at": "2026-11-21T10:00:03.000Z",
                "response_body": None,
            },
            {
                "attempt": 2,
                "started_at": "2026-11-21T10:00:03.000Z",
                "finished_at": "2026-11-21T10:00:04.000Z",
                "outcome": "delivered",
                "status_code": 200,
                "error": None,
                "retry_at": None,
                "response_body": None,
            },
        ]
    }


def test_long_errors_are_cut_to_the_limit():
    record = Attempt("m1", 1, T0, T0, AttemptOutcome.FAILED, error="x" * 2000)
    assert record.error == "x" * MAX_ERROR


@pytest.mark.parametrize(
    ("outcome", "retry_at"),
    [(AttemptOutcome.RETRY, None), (AttemptOutcome.FAILED, T0), (AttemptOutcome.DELIVERED, T0)],
)
def test_retry_at_is_set_exactly_for_retries(outcome, retry_at):
    with pytest.raises(ValueError):
        Attempt("m1", 1, T0, T0, outcome, retry_at=retry_at)


def test_attempts_are_one_based():
    with pytest.raises(ValueError):
        Attempt("m1", 0, T0, T0, AttemptOutcome.DELIVERED)


def test_the_record_a_message_keeps_reads_back_as_the_attempt() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    attempt = Attempt("m", 3, start, start + timedelta(milliseconds=5), AttemptOutcome.FAILED, 410, "HTTP 410")
    assert attempts.from_record("m", attempts.to_record(attempt)) == attempt


def test_the_merged_history_lists_the_final_attempt_after_the_items() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    first = Attempt("m", 1, start, start, AttemptOutcome.RETRY, 503, "HTTP 503", retry_at=start)
    final = Attempt("m", 2, start, start, AttemptOutcome.DELIVERED, 200)
    assert attempts.merged([first], final) == [first, final]
