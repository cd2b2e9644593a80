"""After a failed attempt: retry when (backoff, with Retry-After as a minimum up to 24 h, then the delivery window's
next opening), fail, or expire."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.core import retry
from hourglass.core import window as windows
from hourglass.core.attempts import AttemptOutcome
from hourglass.core.model import RetryPolicy, past_expiry

MAX_RETRY_AFTER = 86400.0


@dataclass(frozen=True)
class AfterFailure:
    outcome: AttemptOutcome
    retry_at: datetime | None = None


def retry_wait(policy: RetryPolicy, attempt: int, *, jitter: float = 0.0, retry_after: float | None = None) -> float:
    """Seconds until the next attempt: the backoff, or the target's Retry-After (at most 24 h) when longer."""
    wait = retry.backoff(policy, attempt, jitter=jitter)
    if retry_after is None:
        return wait
    return max(wait, min(max(retry_after, 0.0), MAX_RETRY_AFTER))


def after_failure(
    policy: RetryPolicy,
    *,
    attempt: int,
    retryable: bool,
    now: datetime,
    expires_at: datetime | None,
    retry_after: float | None = None,
    jitter: float = 0.0,
    window: windows.Window | None = None,
) -> AfterFailure:
    """`attempt` counts within the current retry budget (a redelivery starts a fresh one at 1); `window`: the
    message's delivery window (`admission.window`), whose next opening a retry waits for."""
    if not retryable or not retry.has_attempts_left(policy, attempt):
        return AfterFailure(AttemptOutcome.FAILED)
    wait = timedelta(seconds=retry_wait(policy, attempt, jitter=jitter, retry_after=retry_after))
    retry_at = windows.opening(window, now + wait)
    if past_expiry(expires_at, retry_at):
        return AfterFailure(AttemptOutcome.EXPIRED)
    return AfterFailure(AttemptOutcome.RETRY, retry_at)
