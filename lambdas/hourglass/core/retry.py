"""Retry policy: how long to wait after a failed attempt, and whether to try again."""

from __future__ import annotations

from hourglass.core.model import RetryPolicy

# A retry's backoff is lengthened by up to this share of itself, so that the retries of one outage spread out.
MAX_BACKOFF_STRETCH = 0.10


def backoff(policy: RetryPolicy, attempt: int, *, jitter: float = 0.0) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based); `jitter` in [0, 1) scales the stretch (up to +10%).

    A target's Retry-After is `next_attempt.retry_wait`'s to apply.
    """
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    exponent = min(attempt - 1, 64)
    wait = min(policy.backoff_max, policy.backoff_base * 2.0**exponent)
    return stretched(wait, jitter, MAX_BACKOFF_STRETCH)


def stretched(wait: float, jitter: float, most: float) -> float:
    """`wait` lengthened by `jitter` (clamped to [0, 1]) times `most` of itself."""
    return wait * (1.0 + most * min(max(jitter, 0.0), 1.0))


def has_attempts_left(policy: RetryPolicy, attempts_made: int) -> bool:
    return attempts_made < policy.max_attempts
