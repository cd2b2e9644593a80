"""Retry policy: how long to wait after a failed attempt, and whether to try again."""

from __future__ import annotations

from hourglass.core.model import RetryPolicy

MAX_JITTER = 0.10


def backoff(policy: RetryPolicy, attempt: int, *, jitter: float = 0.0) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based); `jitter` in [0, 1) scales the +10% allowance.

    A target's Retry-After is `next_attempt.retry_wait`'s to apply.
    """
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    exponent = min(attempt - 1, 64)
    wait = min(policy.backoff_max, policy.backoff_base * 2.0**exponent)
    wait *= 1.0 + MAX_JITTER * min(max(jitter, 0.0), 1.0)
    return wait


def has_attempts_left(policy: RetryPolicy, attempts_made: int) -> bool:
    return attempts_made < policy.max_attempts
