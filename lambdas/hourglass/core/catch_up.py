"""Catch-up: which occurrences of a schedule missed while it or its queue was paused, or while Hourglass could
not run them, are still delivered (`skip` none, `latest` the most recent, `all` each, at most ALL_MAX)."""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from hourglass.core.recurrence import CatchUp, Schedule

# `all` delivers at most this many missed occurrences, the most recent ones; older ones are skipped.
ALL_MAX = 100
_FIRST_SPAN = timedelta(minutes=1)


def overtaken(schedule: Schedule, at: datetime, now: datetime) -> bool:
    """An occurrence not yet attempted is missed once its successor's latest due time (jitter included) has
    passed too: lateness short of that never drops an occurrence."""
    following = schedule.next_after(at)
    return following is not None and following + timedelta(seconds=schedule.recurrence.jitter) <= now


def delivers(schedule: Schedule, at: datetime, now: datetime) -> bool:
    """Whether a never attempted occurrence at `at` is still delivered at `now` under the schedule's policy."""
    if not overtaken(schedule, at, now):
        return True
    if schedule.recurrence.catch_up is not CatchUp.ALL:
        return False
    return at >= recent(schedule, at - timedelta(microseconds=1), now, ALL_MAX)[0]


def next_planned(schedule: Schedule, after: datetime, now: datetime) -> datetime | None:
    """The occurrence to store after `after`: the next one, or, when that one is past (missed), the one the
    policy picks: the next future one (`skip`), the most recent past one (`latest`), the oldest of the
    ALL_MAX most recent past ones (`all`, each chaining the next)."""
    first = schedule.next_after(after)
    if first is None or first + timedelta(seconds=schedule.recurrence.jitter) > now:
        return first
    policy = schedule.recurrence.catch_up
    if policy is CatchUp.SKIP:
        return schedule.next_after(now)
    return recent(schedule, after, now, 1 if policy is CatchUp.LATEST else ALL_MAX)[0]


def recent(schedule: Schedule, after: datetime, now: datetime, count: int) -> list[datetime]:
    """The last `count` (or fewer) occurrences in (after, now], oldest first; at least one exists. It looks
    back over a span that grows fourfold, so a long pause costs a handful of walks, not one per occurrence."""
    span = _FIRST_SPAN
    while True:
        start = max(after, now - span)
        found: deque[datetime] = deque(maxlen=count)
        at = schedule.next_after(start)
        while at is not None and at <= now:
            found.append(at)
            at = schedule.next_after(at)
        if len(found) >= count or start == after:
            return list(found)
        span *= 4
