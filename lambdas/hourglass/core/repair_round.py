"""The chain repair's round through every schedule: where it has got to, when the next round may start (at most
one a minute, however often the sweeper runs), and which schedules a round looks at (`looks_at`): the repair's
reads grow neither with the sweep rate nor with a schedule's interval."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.core.recurrence import Schedule

# A new round starts at most this long after the one before it started (the stack's sweep interval).
ROUND_EVERY = timedelta(seconds=60)
# A round looks at a schedule whose next occurrence is due within this (or within twice the last round's
# length, when rounds take longer), or that was written within it; any other waits for a later round.
HORIZON = timedelta(minutes=10)


@dataclass(frozen=True)
class RepairRound:
    """`after`: the last schedule looked at (its due-index sort key); None at the start of a round.
    `started`: when the round under way (or the last one) started; None if never (or unknown).
    `took`: how long the last whole round took, with the wait for the next one (about the longest a schedule
    waits between two looks); None if unknown."""

    after: str | None = None
    started: datetime | None = None
    took: timedelta | None = None

    def due(self, now: datetime) -> bool:
        """Whether a scheduled sweep at `now` looks at the next batch: a round under way goes on; a new one
        starts once ROUND_EVERY has passed since the last one started."""
        if self.after is not None or self.started is None:
            return True
        # A start in the future (a clock set back) does not hold the repair off.
        return not self.started <= now < self.started + ROUND_EVERY

    def moved_to(self, after: str | None, now: datetime) -> RepairRound:
        """The round after a batch that ended at `after` (None: the round is over), the batch read at `now`."""
        started = now if self.after is None or self.started is None else self.started
        took = now - started + ROUND_EVERY if after is None else self.took
        return RepairRound(after, started, took)

    def horizon(self) -> timedelta:
        """How far ahead a round looks: far enough that the next round comes before an occurrence it skips."""
        return max(HORIZON, 2 * (self.took or timedelta(0)))

    def looks_at(self, schedule: Schedule, expected: datetime, now: datetime) -> bool:
        """Whether this round checks that the occurrence `expected` of `schedule` is stored: it is due within the
        horizon (a chain broken long before is repaired before it is due), or the schedule was written within
        it (a PUT or resume that died before its occurrence is repaired at once)."""
        horizon = self.horizon()
        written = schedule.written_at
        return expected <= now + horizon or written is None or written >= now - horizon
