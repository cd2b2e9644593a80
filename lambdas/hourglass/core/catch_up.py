"""Catch-up: which occurrences of a schedule missed while it or its queue was paused, or while Hourglass could
not run them, are still delivered (`skip` none, `latest` the most recent, `all` each, at most ALL_MAX); and which
of those a closed delivery window defers go at its opening (not missed: `all` each, else the stretch's latest)."""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from hourglass.core import window as windows
from hourglass.core.recurrence import CatchUp, Schedule
from hourglass.core.window import Window

# `all` delivers at most this many missed occurrences, the most recent ones; older ones are skipped.
ALL_MAX = 100
_FIRST_SPAN = timedelta(minutes=1)
_TICK = timedelta(microseconds=1)


def overtaken(schedule: Schedule, at: datetime, now: datetime, window: Window | None = None) -> bool:
    """An occurrence not yet attempted is missed once its successor's latest due time (jitter and `window`
    included) has passed too: lateness short of that never drops an occurrence. One that the window defers
    counts from the opening: its successor is the first occurrence after the opening."""
    opens = deferred_to(schedule, window, at)
    following = schedule.next_after(at if opens is None else opens)
    if following is None:
        return False
    return windows.opening(window, following + timedelta(seconds=schedule.recurrence.jitter)) <= now


def deferred_to(schedule: Schedule, window: Window | None, at: datetime) -> datetime | None:
    """The opening a closed `window` defers the occurrence at `at` to (its due time, jitter included, falls
    outside it); None when it is due inside it."""
    due = schedule.due(at)
    opens = windows.opening(window, due)
    return opens if opens > due else None


def delivers(schedule: Schedule, at: datetime, now: datetime, window: Window | None = None) -> bool:
    """Whether a never attempted occurrence at `at` is still delivered at `now` under the schedule's policy,
    `window` the delivery window of its occurrences."""
    if not overtaken(schedule, at, now, window):
        return True
    if schedule.recurrence.catch_up is not CatchUp.ALL:
        return False
    return at >= recent(schedule, at - timedelta(microseconds=1), now, ALL_MAX)[0]


def next_planned(schedule: Schedule, after: datetime, now: datetime, window: Window | None = None) -> datetime | None:
    """The occurrence to store after `after`: the next one, or, when that one is missed (`overtaken`), the one the
    policy picks: the next future one (`skip`), the most recent past one (`latest`), the oldest of the
    ALL_MAX most recent past ones (`all`, each chaining the next). Of the occurrences a closed `window` defers
    to one opening, it picks as `in_stretch` says."""
    first = schedule.next_after(after)
    if first is None or not overtaken(schedule, first, now, window):  # late short of missed: still stored
        return None if first is None else in_stretch(schedule, window, after, first)
    policy = schedule.recurrence.catch_up
    if policy is CatchUp.SKIP:
        following = schedule.next_after(now)
        return None if following is None else in_stretch(schedule, window, now, following)
    return recent(schedule, after, now, 1 if policy is CatchUp.LATEST else ALL_MAX)[0]


def in_stretch(schedule: Schedule, window: Window | None, after: datetime, first: datetime) -> datetime:
    """The occurrence to store of those from `first` on that a closed window defers to the same opening: `first`
    when it is due inside the window; else the stretch's latest (`skip`, `latest`: one goes at the opening, not
    one per occurrence), or the oldest of its ALL_MAX latest (`all`: each goes, in order, chained)."""
    opens = deferred_to(schedule, window, first)
    if opens is None:
        return first
    count = ALL_MAX if schedule.recurrence.catch_up is CatchUp.ALL else 1
    return recent(schedule, after, opens - _TICK, count)[0]


def upcoming(schedule: Schedule, now: datetime, window: Window | None, count: int) -> list[datetime]:
    """When the next `count` occurrences after `now` that will be stored are attempted: their due times (jitter
    included), deferred to the opening of `window` when it is closed then."""
    found: list[datetime] = []
    after = now
    while len(found) < count:
        following = schedule.next_after(after)
        if following is None:
            break
        after = in_stretch(schedule, window, after, following)
        found.append(windows.opening(window, schedule.due(after)))
    return found


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
