"""Spreading a busy queue's messages over partitions: this process's tally of what it stored, the window records it
adds to, and the queue's switch (`core/message_partitions.py`)."""

from __future__ import annotations

from datetime import datetime

from hourglass.adapters import storage
from hourglass.core import message_partitions
from hourglass.core.keys import LATER_QUEUE
from hourglass.core.message_partitions import Tally
from hourglass.core.model import Queue
from hourglass.errors import StoreError
from hourglass.logs import log

StorageUsed = storage.QueueSpread


class Spreading:
    """One per process (`Context.spreading`): its tally outlives a request, as the rule counts per window."""

    def __init__(self, store: StorageUsed) -> None:
        self.store = store
        self.tally = Tally()

    def took(self, queue: Queue, count: int, now: datetime) -> None:
        """Counts `count` messages stored in `queue`; spreads it when its window's record says so. Never raises: a
        record missed is counted again with the next ones."""
        if queue.partitions > 1 or queue.name == LATER_QUEUE:
            return
        report = self.tally.took(queue.name, count, now)
        if report is None:
            return
        window, held = report
        try:
            total = self.store.add_to_window(queue.name, window, held)
            if message_partitions.spreads(total) and self.store.spread_queue(
                queue.name, queue.created_at, message_partitions.PARTITIONS
            ):
                log("queue_spread", queue=queue.name, partitions=message_partitions.PARTITIONS, window_total=total)
        except StoreError as exc:
            log("spread_failed", queue=queue.name, error=str(exc))
