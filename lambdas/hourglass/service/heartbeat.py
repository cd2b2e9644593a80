"""The heartbeat: a dispatcher batch's timer records stay hidden while it works, and no longer.

Lambda's event source receives them with the queue's visibility (6 x the function timeout, for its own
retries of a throttled batch): a dispatcher that died would leave them hidden that long. A running batch
hides them for a short hold instead and renews it, so after a crash or timeout they come back within it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from types import TracebackType

from hourglass.adapters.timer_queue import TimerQueue
from hourglass.core import deadline
from hourglass.errors import TimerQueueError
from hourglass.logs import log


class Heartbeat:
    """Holds the records (record id -> receipt handle) of one batch from `__enter__` to `__exit__`."""

    def __init__(
        self, timers: TimerQueue, receipts: Mapping[str, str], hold: float, clock: Callable[[], datetime]
    ) -> None:
        self.timers = timers
        self.receipts = dict(receipts)
        self.hold = math.ceil(hold)
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if self.receipts:
            self.beat()
            self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(deadline.heartbeat_every(self.hold)):
            self.beat()

    def beat(self) -> None:
        """Every record hidden for the hold from now."""
        self._hide(dict.fromkeys(self.receipts.values(), self.hold))

    def release(self, back_at: Mapping[str, datetime], errors: Mapping[str, int] | None = None) -> None:
        """After the batch: failed records that wait for an instant (a lease's end) hidden until then;
        those that failed with an error (record id -> its receive count) for their backoff."""
        now = self.clock()
        waits = {
            self.receipts[record]: max(1, math.ceil((at - now).total_seconds()))
            for record, at in back_at.items()
            if record in self.receipts
        }
        for record, receives in (errors or {}).items():
            if record in self.receipts and record not in back_at:
                waits[self.receipts[record]] = deadline.error_backoff(self.hold, receives)
        if waits:
            self._hide(waits)

    def _hide(self, receipts: dict[str, int]) -> None:
        try:
            self.timers.hide(receipts)
        except TimerQueueError as exc:
            # Not renewed, a record shows again after its current visibility: a timer handed out
            # twice is harmless (the begin write is conditional on the version).
            log("heartbeat_failed", records=len(receipts), error=str(exc))
