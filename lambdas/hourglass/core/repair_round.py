"""The chain repair's round through every schedule: where it has got to, and when the next round may start
(at most one a minute, however often the sweeper runs: the repair's reads do not grow with the sweep rate)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# A new round starts at most this long after the one before it started (the stack's sweep interval).
ROUND_EVERY = timedelta(seconds=60)


@dataclass(frozen=True)
class RepairRound:
    """`after`: the last schedule looked at (its due-index sort key); None at the start of a round.
    `started`: when the round under way (or the last one) started; None if never (or unknown)."""

    after: str | None = None
    started: datetime | None = None

    def due(self, now: datetime) -> bool:
        """Whether a scheduled sweep at `now` looks at the next batch: a round under way goes on; a new one
        starts once ROUND_EVERY has passed since the last one started."""
        if self.after is not None or self.started is None:
            return True
        # A start in the future (a clock set back) does not hold the repair off.
        return not self.started <= now < self.started + ROUND_EVERY

    def moved_to(self, after: str | None, now: datetime) -> RepairRound:
        """The round after a batch that ended at `after` (None: the round is over), the batch read at `now`."""
        return RepairRound(after, now if self.after is None else self.started)
