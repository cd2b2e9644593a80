"""The notification sent to a queue's failure destination when one of its messages ends failed or expired,
and its outbox: due-index keys on the final item until the notice is sent, each entry with its own next try."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain, zip_longest
from typing import Any

from hourglass.core import limits
from hourglass.core.delivery import Outcome, compact
from hourglass.core.handoff import DueEntry
from hourglass.core.keys import outbox_pk, sort_key, sort_key_bound
from hourglass.core.model import Message, Notice, NoticeStatus, Status, Target
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import format_rfc3339, to_ms

EVENTS = {Status.FAILED: "message.failed", Status.EXPIRED: "message.expired"}
# The writer sends the notice right after the final write; recovery takes over an entry this much later.
OUTBOX_GRACE = timedelta(minutes=1)
# A failed try waits OUTBOX_GRACE, doubling per try up to BACKOFF_MAX, plus up to a quarter (jitter);
# the MAX_TRIES-th failed try (about 4 hours after the first) gives the notice up.
BACKOFF_MAX = timedelta(hours=1)
MAX_TRIES = 10
# A notice's backoff is lengthened by up to this share of itself (fixed per message and try).
MAX_NOTICE_STRETCH = 0.25


def outbox_keys(message_id: str, finished_at: datetime) -> SweepKeys:
    """Keys the final write carries when a notice is owed: found by recovery from OUTBOX_GRACE on."""
    return entry_keys(message_id, finished_at + OUTBOX_GRACE)


def entry_keys(message_id: str, next_try: datetime) -> SweepKeys:
    """An outbox entry's keys: recovery takes it from `next_try` on, earliest first."""
    return SweepKeys(outbox_pk(message_id), sort_key(to_ms(next_try), message_id))


def after_failure(message_id: str, tries: int, outcome: Outcome, finished_at: datetime, now: datetime) -> Notice:
    """The notice after its `tries`-th try failed with `outcome`: a permanent refusal, or the last try,
    gives it up; otherwise it waits its backoff (at least a Retry-After up to BACKOFF_MAX)."""
    if not outcome.retryable or tries >= MAX_TRIES:
        return Notice(NoticeStatus.ABANDONED, tries, outcome.error, None, finished_at)
    wait = backoff(message_id, tries)
    if outcome.retry_after:
        wait = max(wait, min(timedelta(seconds=outcome.retry_after), BACKOFF_MAX))
    return Notice(NoticeStatus.PENDING, tries, outcome.error, now + wait, finished_at)


def backoff(message_id: str, tries: int) -> timedelta:
    """The wait after the `tries`-th failed try; the jitter is fixed per message and try, so that
    the notices of one outage spread out without a random source."""
    doubled = min(BACKOFF_MAX, OUTBOX_GRACE * 2 ** min(tries - 1, 20))
    jitter = zlib.crc32(f"{message_id}#{tries}".encode()) % 1000 / 1000
    return doubled * (1 + MAX_NOTICE_STRETCH * jitter)


def fair_order(entries: Iterable[DueEntry]) -> Iterator[DueEntry]:
    """Due entries taken in turn from each queue (each queue's own earliest first), so that one queue's
    backlog never fills a recovery run ahead of another queue's notice."""
    by_queue: dict[str, list[DueEntry]] = {}
    for entry in entries:
        by_queue.setdefault(entry.queue, []).append(entry)
    rounds = zip_longest(*by_queue.values())
    return (entry for entry in chain.from_iterable(rounds) if entry is not None)


def outbox_range(now: datetime) -> tuple[str, str]:
    """The outbox sort keys recovery takes at `now`: every entry whose grace has passed."""
    return sort_key_bound(0, upper=False), sort_key_bound(to_ms(now), upper=True)


def notifies(status: Status) -> bool:
    """Whether ending in `status` notifies the failure destination (when the queue has one)."""
    return status in EVENTS


def failure_notice(message: Message, finished_at: datetime) -> dict[str, Any]:
    if not notifies(message.status):
        raise ValueError(f"a {message.status.value} message does not notify the failure destination")
    return {
        "event": EVENTS[message.status],
        "id": message.id,
        "queue": message.queue,
        "status": message.status.value,
        "body": message.body,
        "due_at": format_rfc3339(message.due_at),
        "attempts": message.attempts,
        "last_error": message.last_error,
        "finished_at": format_rfc3339(finished_at),
    }


# Outbox entries of notices about a queue itself have ids no message id can have (those are hex and "-").
QUEUE_PAUSED_ID = "@paused."


@dataclass(frozen=True)
class QueuePaused:
    """A `queue.paused` notice still owed: an item of its own in the queue's partition, written by the same
    transaction as the pause, and an outbox entry like a message's notice (`notice` says its tries)."""

    queue: str
    reason: str
    ratio: float
    paused_at: datetime
    # The life of the queue that paused (its created_at): a later queue of the same name is not told.
    epoch: datetime | None
    notice: Notice
    version: int = 1

    @property
    def id(self) -> str:
        return f"{QUEUE_PAUSED_ID}{to_ms(self.paused_at)}"


def queue_paused(queue: str, reason: str, ratio: float, paused_at: datetime, epoch: datetime | None) -> QueuePaused:
    """The notice a trip owes, found by recovery OUTBOX_GRACE after the pause unless its writer sends it first."""
    notice = Notice(NoticeStatus.PENDING, 0, None, paused_at + OUTBOX_GRACE, paused_at)
    return QueuePaused(queue, reason, round(ratio, 4), paused_at, epoch, notice)


def is_queue_paused(entry_id: str) -> bool:
    """Whether an outbox entry is a `queue.paused` notice (else a message's)."""
    return entry_id.startswith(QUEUE_PAUSED_ID)


def queue_paused_notice(notice: QueuePaused) -> dict[str, Any]:
    """The notice of a queue that paused itself (v1.2: the circuit breaker)."""
    return {
        "event": "queue.paused",
        "queue": notice.queue,
        "reason": notice.reason,
        "failure_ratio": notice.ratio,
        "paused_at": format_rfc3339(notice.paused_at),
    }


def notice_text(message: Message, finished_at: datetime, destination: Target) -> str:
    """The notice as sent to `destination`: whole when it fits the destination's payload limit, else without
    the body (`"body": null, "body_omitted": true`; GET returns the body while the message is kept). Without
    the body every notice fits: ids, times and a last_error of at most 500 characters."""
    notice = failure_notice(message, finished_at)
    text = compact(notice).decode()
    limit = limits.payload_limit(destination)
    if limit is not None and limits.payload_bytes(destination, text) > limit:
        text = compact({**notice, "body": None, "body_omitted": True}).decode()
    return text


def notice_headers(message: Message) -> dict[str, str]:
    """Headers of an HTTP notification, besides the destination's own; the id lets a receiver drop repeats."""
    return {
        "Content-Type": "application/json",
        "Hourglass-Event": EVENTS[message.status],
        "Hourglass-Message-Id": message.id,
        "Hourglass-Queue": message.queue,
    }
