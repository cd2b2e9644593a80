"""Per-minute figures kept in memory for a day: what the local runtime charts instead of CloudWatch."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable

from hourglass.core.charts import COUNTERS, Series, Window, percentile_series

MINUTE_MS = 60_000
KEEP_MINUTES = 24 * 60
# Lateness values kept per queue and minute: enough for p99, bounded however busy the minute.
MAX_VALUES = 2000


class MinuteHistory:
    """Counts and lateness values per (queue, minute), the last KEEP_MINUTES minutes."""

    source = "local"

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._counts: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._lateness: dict[tuple[str, int], list[float]] = defaultdict(list)
        self._lock = threading.Lock()
        self._oldest = 0

    def count(self, name: str, value: float, queue: str) -> None:
        minute = int(self.clock() * 1000) // MINUTE_MS
        with self._lock:
            self._counts[(queue, minute)][name] += value
            self._prune(minute)

    def lateness(self, ms: float, queue: str) -> None:
        minute = int(self.clock() * 1000) // MINUTE_MS
        with self._lock:
            values = self._lateness[(queue, minute)]
            if len(values) < MAX_VALUES:
                values.append(ms)
            self._prune(minute)

    def _prune(self, minute: int) -> None:
        oldest = minute - KEEP_MINUTES
        if oldest <= self._oldest:
            return
        self._oldest = oldest
        for key in [k for k in self._counts if k[1] < oldest]:
            del self._counts[key]
        for key in [k for k in self._lateness if k[1] < oldest]:
            del self._lateness[key]

    def series(self, queue: str, win: Window) -> Series:
        """Each counter summed per period of `win`, and lateness p50/p99 per period."""
        step = win.period // 60
        first = int(win.start.timestamp()) // 60
        slots = [range(first + i * step, first + (i + 1) * step) for i in range(win.points)]
        with self._lock:
            counts: Series = {
                doc_name: [sum(self._counts.get((queue, m), {}).get(name, 0.0) for m in slot) for slot in slots]
                for name, doc_name in COUNTERS.items()
            }
            values = [[v for m in slot for v in self._lateness.get((queue, m), [])] for slot in slots]
        return {**counts, **percentile_series(values)}
