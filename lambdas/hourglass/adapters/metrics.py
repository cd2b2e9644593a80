"""CloudWatch metrics in embedded metric format (EMF): gathered per invocation, printed on `flush`.

One EMF document per dimension set (a queue, or none) per flush, counters summed and lateness as a
values array, instead of one document per data point: CloudWatch Logs bills every byte ingested.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict
from typing import Any, TextIO

from hourglass.adapters.metric_history import MinuteHistory

NAMESPACE = "Hourglass"
UNITS = {"LatenessMs": "Milliseconds"}
# EMF takes at most 100 values per metric in one document.
MAX_VALUES = 100


class Metrics:
    """Counts in memory (cumulative, for tests and benchmarks); `flush` prints what came since the last one."""

    def __init__(self, stream: TextIO | None = None, emit: bool = True, history: MinuteHistory | None = None) -> None:
        self.stream = stream or sys.stdout
        self.emit_lines = emit
        # Per-queue figures per minute, kept where no CloudWatch charts them (the local runtime).
        self.history = history
        self.counts: dict[str, float] = defaultdict(float)
        self.lateness_ms: list[float] = []
        self._pending_counts: dict[str | None, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._pending_values: dict[str | None, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self._lock = threading.Lock()

    def count(self, name: str, value: float = 1, *, queue: str | None = None) -> None:
        if value == 0:
            return
        with self._lock:
            self.counts[name] += value
            self._pending_counts[queue][name] += value
        if self.history is not None and queue is not None:
            self.history.count(name, value, queue)

    def lateness(self, ms: float, *, queue: str) -> None:
        with self._lock:
            self.lateness_ms.append(ms)
            self._pending_values[queue]["LatenessMs"].append(round(ms, 1))
        if self.history is not None:
            self.history.lateness(ms, queue)

    def flush(self) -> int:
        """Prints the data points gathered since the last flush (handlers call it once per invocation);
        returns how many EMF documents it wrote."""
        with self._lock:
            counts, values = self._pending_counts, self._pending_values
            self._pending_counts = defaultdict(lambda: defaultdict(float))
            self._pending_values = defaultdict(lambda: defaultdict(list))
        if not self.emit_lines:
            return 0
        lines = []
        timestamp = int(time.time() * 1000)
        for queue in sorted(set(counts) | set(values), key=lambda q: q or ""):
            series = values.get(queue, {})
            longest = max((len(v) for v in series.values()), default=0)
            for start in range(0, max(1, longest), MAX_VALUES):
                chunk = {name: v[start : start + MAX_VALUES] for name, v in series.items()}
                figures: dict[str, Any] = dict(counts.get(queue, {})) if start == 0 else {}
                figures.update((name, v) for name, v in chunk.items() if v)
                if figures:
                    lines.append(_document(timestamp, queue, figures))
        if lines:
            with self._lock:
                self.stream.write("".join(line + "\n" for line in lines))
        return len(lines)


def _document(timestamp: int, queue: str | None, figures: dict[str, Any]) -> str:
    doc: dict[str, Any] = {
        "_aws": {
            "Timestamp": timestamp,
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    # Per queue and, for dashboards and alarms (stacks/constructs/monitoring.py), across all queues.
                    "Dimensions": [["Queue"], []] if queue else [[]],
                    "Metrics": [{"Name": name, "Unit": UNITS.get(name, "Count")} for name in sorted(figures)],
                }
            ],
        },
        **{name: _number(value) for name, value in sorted(figures.items())},
    }
    if queue:
        doc["Queue"] = queue
    return json.dumps(doc, separators=(",", ":"))


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
