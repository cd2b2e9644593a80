"""A queue's epoch: which life of a queue name something belongs to, so that nothing of a deleted queue
acts on a later queue of the same name. The epoch is the queue's `created_at`."""

from __future__ import annotations

from datetime import datetime, timedelta

from hourglass.core.model import Queue

# A new life starts at least this long after the last one ended, even on a clock that stood still.
TICK = timedelta(milliseconds=1)


def belongs(queue: Queue | None, epoch: datetime | None) -> bool:
    """Whether something stamped with `epoch` belongs to `queue` as it is now (no queue: to nothing)."""
    return queue is not None and queue.created_at == epoch


def start(now: datetime, ended: datetime | None) -> datetime:
    """The epoch of a queue created at `now` whose name's previous life ended at `ended` (None: never)."""
    return now if ended is None or now > ended else ended + TICK
