"""After a failed attempt: Retry-After beyond backoff_max up to 24 h, then the expiry rules."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from hourglass.core.attempts import AttemptOutcome
from hourglass.core.model import RetryPolicy
from hourglass.core.next_attempt import MAX_RETRY_AFTER, AfterFailure, after_failure, retry_wait
from hourglass.core.window import Window

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
SHORT = RetryPolicy(max_attempts=5, backoff_base=1, backoff_max=2)


def test_without_retry_after_the_wait_is_the_backoff():
    assert [retry_wait(SHORT, n) for n in (1, 2, 3)] == [1, 2, 2]


def test_retry_after_is_honoured_beyond_backoff_max():
    assert retry_wait(SHORT, 1, retry_after=30) == 30


def test_retry_after_shorter_than_the_backoff_does_not_shorten_it():
    assert retry_wait(RetryPolicy(backoff_base=60), 1, retry_after=5) == 60


def test_retry_after_is_capped_at_a_day():
    assert retry_wait(SHORT, 1, retry_after=10 * 86400) == MAX_RETRY_AFTER


def test_negative_retry_after_counts_as_none():
    assert retry_wait(SHORT, 2, retry_after=-5) == 2


def test_retryable_failure_with_budget_left_is_retried_after_retry_after():
    result = after_failure(SHORT, attempt=1, retryable=True, now=NOW, expires_at=None, retry_after=30)
    assert result == AfterFailure(AttemptOutcome.RETRY, NOW + timedelta(seconds=30))


def test_permanent_failure_fails_at_once():
    result = after_failure(SHORT, attempt=1, retryable=False, now=NOW, expires_at=None)
    assert result == AfterFailure(AttemptOutcome.FAILED)


def test_exhausted_budget_fails():
    result = after_failure(SHORT, attempt=5, retryable=True, now=NOW, expires_at=None)
    assert result.outcome is AttemptOutcome.FAILED


def test_retry_after_past_the_expiry_expires_the_message():
    expires = NOW + timedelta(seconds=20)
    result = after_failure(SHORT, attempt=1, retryable=True, now=NOW, expires_at=expires, retry_after=30)
    assert result == AfterFailure(AttemptOutcome.EXPIRED)


@pytest.mark.parametrize("jitter", [0.0, 0.5, 1.0])
def test_jitter_never_shortens_a_retry_after(jitter):
    assert retry_wait(SHORT, 1, jitter=jitter, retry_after=30) == 30


# NOW is a Saturday, 10:00 UTC: this window opens on Mondays at 09:00.
MONDAYS = Window("UTC", frozenset({0}), time(9), time(10))


def test_a_retry_outside_the_window_waits_for_its_next_opening():
    decided = after_failure(SHORT, attempt=1, retryable=True, now=NOW, expires_at=None, window=MONDAYS)
    assert decided == AfterFailure(AttemptOutcome.RETRY, datetime(2026, 11, 23, 9, 0, tzinfo=UTC))


def test_a_retry_whose_opening_is_past_the_expiry_expires():
    expiry = NOW + timedelta(days=1)
    decided = after_failure(SHORT, attempt=1, retryable=True, now=NOW, expires_at=expiry, window=MONDAYS)
    assert decided.outcome is AttemptOutcome.EXPIRED
