"""CloudWatch metrics in embedded metric format (EMF), printed to stdout for Lambda to ship."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict
from typing import TextIO

NAMESPACE = "Hourglass"
UNITS = {"LatenessMs": "Milliseconds"}


class Metrics:
    """Counts in memory (for tests and benchmarks) and emits one EMF line per data point."""

    def __init__(self, stream: TextIO | None = None, emit: bool = True) -> None:
        self.stream = stream or sys.stdout
        self.emit_lines = emit
        self.counts: dict[str, float] = defaultdict(float)
        self.lateness_ms: list[float] = []
        self._lock = threading.Lock()

    def count(self, name: str, value: float = 1, *, queue: str | None = None) -> None:
        with self._lock:
            self.counts[name] += value
        self._emit(name, value, queue)

    def lateness(self, ms: float, *, queue: str) -> None:
        with self._lock:
            self.lateness_ms.append(ms)
        self._emit("LatenessMs", ms, queue)

    def _emit(self, name: str, value: float, queue: str | None) -> None:
        if not self.emit_lines or value == 0:
            return
        # Per queue and, for dashboards and alarms (stacks/constructs/monitoring.py), across all queues.
        dimensions = [["Queue"], []] if queue else [[]]
        doc = {
            "_aws": {
                "Timestamp": int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": NAMESPACE,
                        "Dimensions": dimensions,
                        "Metrics": [{"Name": name, "Unit": UNITS.get(name, "Count")}],
                    }
                ],
            },
            name: value,
        }
        if queue:
            doc["Queue"] = queue
        line = json.dumps(doc, separators=(",", ":"))
        with self._lock:
            self.stream.write(line + "\n")
