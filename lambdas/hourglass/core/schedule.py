"""Scheduling arithmetic: due times, due-index buckets and shards, hand-off and lease windows."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.core.keys import bucket_pk, sort_key
from hourglass.core.keys import shard_of as shard_of  # a message's due-index shard
from hourglass.core.keys import sort_key_bound as sort_key_bound  # the sweep's bucket bounds
from hourglass.core.timestamps import ceil_ms, seconds_between, to_ms

MAX_TIMER_DELAY = 900
# How long after its due time a handed-off message may sit in the due index before a recovery
# sweep treats it as stranded.
LEASE_AFTER_DUE = 120.0
RECOVERY_GRACE = LEASE_AFTER_DUE + 60.0
# Timer messages are made visible this much before they are due so that a poller's wake-up lag
# never makes them late; the dispatcher sleeps the rest.
TIMER_HEAD_START = 1
# The dispatcher sleeps at most this long; anything earlier goes back to the timer queue.
MAX_SLEEP = 3.0


@dataclass(frozen=True)
class SweepKeys:
    pk: str
    sk: str


def due_time(now: datetime, *, delay: float | None, deliver_at: datetime | None, default_delay: float) -> datetime:
    """When a message is due, in whole milliseconds rounded up (never early); a past `deliver_at` means now."""
    if deliver_at is not None:
        return ceil_ms(max(deliver_at, now))
    seconds = default_delay if delay is None else delay
    return ceil_ms(now + timedelta(microseconds=math.ceil(seconds * 1_000_000)))


def bucket_of(due: datetime, bucket_seconds: int) -> int:
    return to_ms(due) // (bucket_seconds * 1000)


def sweep_keys(
    message_id: str,
    due: datetime,
    *,
    shards: int,
    bucket_seconds: int,
    scheduled_ms: int | None = None,
    width: Callable[[int], int] | None = None,
) -> SweepKeys:
    """The entry's keys; `width` gives a bucket's width (`core.due_width`), `shards` when there is none."""
    bucket = bucket_of(due, bucket_seconds)
    pk = bucket_pk(bucket, shard_of(message_id, shards if width is None else width(bucket)))
    return SweepKeys(pk=pk, sk=sort_key(to_ms(due), message_id, scheduled_ms))


def buckets_between(start_ms: int, end_ms: int, bucket_seconds: int) -> Iterator[int]:
    width = bucket_seconds * 1000
    yield from range(start_ms // width, end_ms // width + 1)


def hands_off_now(due: datetime, now: datetime, lookahead: float, safety: float) -> bool:
    """Whether a message goes straight to the timer queue instead of waiting for a sweep.

    `safety` is longer than an ingest call can take, so a sweep that starts while a write is in
    flight cannot move its watermark past that write's due time (see docs/design.md).
    """
    return due <= now + timedelta(seconds=min(lookahead + safety, MAX_TIMER_DELAY))


def timer_delay(due: datetime, now: datetime) -> int:
    """Whole seconds of SQS DelaySeconds; the dispatcher sleeps what is left."""
    seconds = seconds_between(now, due) - TIMER_HEAD_START
    return max(0, min(MAX_TIMER_DELAY, math.floor(seconds)))


def claim_lease(due: datetime, now: datetime) -> datetime:
    """Until when a claimed message belongs to the sweeper or dispatcher that claimed it."""
    return max(due, now) + timedelta(seconds=LEASE_AFTER_DUE)


def main_sweep_end(now: datetime, lookahead: float) -> int:
    return to_ms(now + timedelta(seconds=lookahead))


def recovery_sweep_end(now: datetime) -> int:
    return to_ms(now - timedelta(seconds=RECOVERY_GRACE))


def is_early(due: datetime, now: datetime) -> bool:
    return seconds_between(now, due) > MAX_SLEEP


def seconds_until(due: datetime, now: datetime) -> float:
    return max(0.0, seconds_between(now, due))
