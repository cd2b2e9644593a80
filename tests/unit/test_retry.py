"""Retry backoff and attempt accounting."""

from __future__ import annotations

import pytest
from hourglass.core.model import LATER_BACKOFF_BASE, LATER_BACKOFF_MAX, RetryPolicy
from hourglass.core.retry import backoff, has_attempts_left

POLICY = RetryPolicy(max_attempts=5, backoff_base=1, backoff_max=3600)


def test_backoff_doubles_from_the_base():
    assert [backoff(POLICY, n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]


def test_backoff_is_capped_by_backoff_max():
    policy = RetryPolicy(backoff_base=1, backoff_max=5)
    assert [backoff(policy, n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 5, 5]


def test_backoff_scales_with_base():
    assert backoff(RetryPolicy(backoff_base=2.5), 3) == 10.0


def test_backoff_stays_finite_for_huge_attempts():
    assert backoff(POLICY, 10_000) == 3600


@pytest.mark.parametrize("attempt", [0, -1])
def test_backoff_attempts_are_one_based(attempt):
    with pytest.raises(ValueError):
        backoff(POLICY, attempt)


def test_full_jitter_adds_at_most_ten_percent():
    assert backoff(POLICY, 4, jitter=1.0) == pytest.approx(8.8)


def test_jitter_out_of_range_is_clamped():
    assert backoff(POLICY, 4, jitter=5.0) == pytest.approx(8.8)
    assert backoff(POLICY, 4, jitter=-1.0) == 8


def test_jitter_never_exceeds_ten_percent_over_the_cap():
    policy = RetryPolicy(backoff_base=1, backoff_max=5)
    assert backoff(policy, 10, jitter=0.999) <= 5.5


def test_later_policy_waits_10_20_40():
    policy = RetryPolicy(max_attempts=4, backoff_base=LATER_BACKOFF_BASE, backoff_max=LATER_BACKOFF_MAX)
    assert [backoff(policy, n) for n in (1, 2, 3)] == [10, 20, 40]


def test_attempts_left_until_max_attempts():
    policy = RetryPolicy(max_attempts=3)
    assert [has_attempts_left(policy, made) for made in (0, 1, 2, 3, 4)] == [True, True, True, False, False]
