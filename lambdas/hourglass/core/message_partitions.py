"""When a queue's messages spread over partitions: a queue that takes SPREAD_AT messages in a window is spread
for the rest of its life, from a tally each ingest process keeps and adds to the window's record now and then.

Time is a parameter. docs/capacity.md ("A queue's partition") says why these numbers.
"""

from __future__ import annotations

from datetime import datetime

from hourglass.core.keys import MESSAGE_PARTITIONS

WINDOW_SECONDS = 10
# A process adds its count of a queue's messages to the window's record once it holds this many: a quiet queue
# writes no record, a busy one about one write per REPORT_AT messages until it is spread.
REPORT_AT = 100
# 100 messages a second: about 300 write units a second on the queue's partition (each message is written about
# three times), a third of DynamoDB's 1,000 per partition, before anything else of the queue's.
SPREAD_AT = 1_000
# How many partitions a spread queue's new messages go to: 10,000 messages a second fit (about 470 write units a
# second each; docs/capacity.md).
PARTITIONS = MESSAGE_PARTITIONS
# Queues a process keeps a tally of at most; past it, tallies of earlier windows are dropped.
TALLY_QUEUES = 1_000


def window_of(now: datetime) -> int:
    return int(now.timestamp()) // WINDOW_SECONDS


def spreads(window_total: int) -> bool:
    """Whether a window's record at this count spreads its queue."""
    return window_total >= SPREAD_AT


class Tally:
    """One process's count of the messages it stored per queue in the current window, not yet in the record."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[int, int]] = {}  # queue -> (window, count)

    def __len__(self) -> int:
        """How many queues it holds a count of."""
        return len(self._held)

    def took(self, queue: str, count: int, now: datetime) -> tuple[int, int] | None:
        """Counts `count` new messages of `queue`; (window, count) to add to the window's record once REPORT_AT
        are held (the tally then starts again), else None."""
        window = window_of(now)
        held_window, held = self._held.get(queue, (window, 0))
        held = held + count if held_window == window else count
        if held >= REPORT_AT:
            self._held.pop(queue, None)
            return window, held
        if queue not in self._held and len(self._held) >= TALLY_QUEUES:
            self._held = {q: (w, c) for q, (w, c) in self._held.items() if w == window}
        self._held[queue] = (window, held)
        return None
