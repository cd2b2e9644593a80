"""The circuit breaker (v1.2): a queue's attempt outcomes counted per time bucket, and when they trip it.

A window is BUCKETS buckets of window / BUCKETS seconds; a decision sums the buckets it covers (the current
one included), so it looks back between `window` and `window` plus one bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from hourglass.core.model import CircuitBreaker

BUCKETS = 10
REASON = "circuit_breaker"
MIN_RATIO, MAX_RATIO = 0.01, 1.0
MIN_ATTEMPTS, MAX_ATTEMPTS = 1, 100_000
MIN_WINDOW, MAX_WINDOW = 10, 86_400


@dataclass(frozen=True)
class Tally:
    """Attempts that ended within a window, and how many of them failed or were retried."""

    attempts: int
    failures: int


def bucket_seconds(breaker: CircuitBreaker) -> int:
    return max(1, math.ceil(breaker.window / BUCKETS))


def bucket_of(breaker: CircuitBreaker, at: datetime) -> int:
    return int(at.timestamp()) // bucket_seconds(breaker)


def window_buckets(breaker: CircuitBreaker, now: datetime) -> tuple[int, int]:
    """The first and last bucket (inclusive) a decision at `now` sums."""
    last = bucket_of(breaker, now)
    return last - math.ceil(breaker.window / bucket_seconds(breaker)), last


def trips(breaker: CircuitBreaker, tally: Tally) -> bool:
    return tally.attempts >= breaker.min_attempts and tally.failures >= breaker.failure_ratio * tally.attempts
