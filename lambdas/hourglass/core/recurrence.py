"""Recurring schedules: the domain type and when their occurrences fall, exact across daylight saving.

A cron rule matches local wall-clock minutes in the schedule's zone, resolved by `wallclock.resolve`;
instants reached from two wall times (a gap's shifted time and the real one) fire once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from hourglass.core.cron import CronExpression
from hourglass.core.ids import occurrence_id
from hourglass.core.model import JSON, Carried
from hourglass.core.wallclock import DEFAULT_ZONE, resolve, wall_time, zone

MIN_EVERY = 60
NEXT_DUE_COUNT = 3
# Looking this far back for the offset in force before a recent gap covers every transition in the
# tz database (the largest, Samoa's skipped day in 2011, is 24 hours).
_GAP_LOOKBACK = (timedelta(0), timedelta(hours=12), timedelta(hours=25))
_TICK = timedelta(microseconds=1)


class CatchUp(StrEnum):
    """Which occurrences missed while paused or down are delivered late (`core.catch_up`)."""

    SKIP = "skip"
    LATEST = "latest"
    ALL = "all"


@dataclass(frozen=True)
class Recurrence:
    """When a schedule fires: exactly one of `cron` or `every` (seconds), within optional bounds."""

    cron: CronExpression | None = None
    every: int | None = None
    timezone: str = DEFAULT_ZONE
    start_at: datetime | None = None
    end_at: datetime | None = None
    catch_up: CatchUp = CatchUp.SKIP
    # Each occurrence is due up to this many seconds after its time (`Schedule.due`), never before.
    jitter: int = 0

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron or every")
        # A positive period, not MIN_EVERY: that is a bound of requests (validation), and a schedule
        # stored under an older bound must still read.
        if self.every is not None and self.every < 1:
            raise ValueError("every must be a positive number of seconds")
        zone(self.timezone)


@dataclass(frozen=True)
class ScheduleRequest(Carried):
    """A validated PUT schedule document, before it belongs to a queue; what its occurrences carry is `Carried`."""

    recurrence: Recurrence
    body: JSON


@dataclass(frozen=True)
class Schedule(Carried):
    """A queue's schedule: its rule, and the body and `Carried` fields given to every occurrence."""

    queue: str
    name: str
    recurrence: Recurrence
    body: JSON
    created_at: datetime
    paused: bool = False
    # Bumped on every replace, so a replaced rule's occurrence never reuses a cancelled one's id.
    version: int = 1
    # The epoch of the queue it was created in (`core.epoch`); None for one stored before epochs were.
    queue_epoch: datetime | None = None
    # When it was last paused: a resume catches up from there (`core.catch_up`); None if never or unknown.
    paused_at: datetime | None = None
    # When this version was written (PUT, pause, resume): the chain repair looks at a schedule written lately
    # whatever its next occurrence (`core.repair_round`); None for one stored before this was kept.
    written_at: datetime | None = None

    def next_after(self, after: datetime) -> datetime | None:
        return next_occurrence(self.recurrence, after, anchor=self.created_at)

    def next_due(self, after: datetime, count: int = NEXT_DUE_COUNT) -> list[datetime]:
        return upcoming(self.recurrence, after, anchor=self.created_at, count=count)

    def occurrence_id(self, at: datetime) -> str:
        return occurrence_id(self.queue, self.name, at, self.version, self.queue_epoch)

    def due(self, at: datetime) -> datetime:
        """When the occurrence at `at` is delivered: `at` plus its jitter, the same every time it is planned
        (a hash of its id, so a repair or a second chaining stores the same message)."""
        if self.recurrence.jitter <= 0:
            return at
        digest = hashlib.sha256(self.occurrence_id(at).encode()).digest()
        spread_ms = self.recurrence.jitter * 1000 + 1
        return at + timedelta(milliseconds=int.from_bytes(digest[:8], "big") % spread_ms)


def next_occurrence(recurrence: Recurrence, after: datetime, *, anchor: datetime) -> datetime | None:
    """The first occurrence strictly after `after` (aware), or None once `end_at` has passed.

    `anchor` (usually the schedule's created_at) is where `every` counts from when there is no
    `start_at`.
    """
    if recurrence.start_at is not None and recurrence.start_at - _TICK > after:
        after = recurrence.start_at - _TICK
    if recurrence.cron is not None:
        found = _next_cron(recurrence.cron, recurrence.timezone, after)
    else:
        assert recurrence.every is not None
        found = _next_every(recurrence.every, recurrence.start_at or anchor, after)
    if found is None or (recurrence.end_at is not None and found > recurrence.end_at):
        return None
    return found


def upcoming(
    recurrence: Recurrence, after: datetime, *, anchor: datetime, count: int = NEXT_DUE_COUNT
) -> list[datetime]:
    """The next `count` occurrences strictly after `after` (fewer if the schedule ends)."""
    found: list[datetime] = []
    while len(found) < count:
        following = next_occurrence(recurrence, after, anchor=anchor)
        if following is None:
            break
        found.append(following)
        after = following
    return found


def _next_every(seconds: int, anchor: datetime, after: datetime) -> datetime:
    if after < anchor:
        return anchor
    interval = timedelta(seconds=seconds)
    return anchor + ((after - anchor) // interval + 1) * interval


def _next_cron(expression: CronExpression, timezone: str, after: datetime) -> datetime | None:
    tz = zone(timezone)
    # A wall time in a recent gap fires later than its reading, so start from the earliest wall
    # reading `after` had under any offset in force lately.
    offset = min((after - back).astimezone(tz).utcoffset() or timedelta(0) for back in _GAP_LOOKBACK)
    start = after.astimezone(UTC).replace(tzinfo=None) + offset
    best: datetime | None = None
    reach: datetime | None = None
    for wall in expression.walls_from(start):
        if reach is not None and wall > reach:
            break
        instant = resolve(wall, tz)
        if instant <= after:
            continue
        best = instant if best is None else min(best, instant)
        # Inside a gap the wall time fires `shift` later, so real wall times up to that far ahead
        # fire earlier and must be looked at too; elsewhere instants follow wall-time order.
        shift = wall_time(instant, tz) - wall
        reach = wall + shift if reach is None else max(reach, wall + shift)
    return best
