"""Progress of a running job: counters summed from Spark tasks, logged by a driver thread."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from hourglass.logs import log
from pyspark import SparkContext

ROWS = "rows"


class Counters:
    """Named Spark accumulators: tasks add to them, the driver reads the sums as tasks finish."""

    def __init__(self, sc: SparkContext, names: Iterable[str]) -> None:
        self._accumulators = {name: sc.accumulator(0) for name in names}

    def add(self, values: Mapping[str, int]) -> None:
        for name, value in values.items():
            self._accumulators[name].add(value)

    def values(self) -> dict[str, int]:
        return {name: int(acc.value) for name, acc in self._accumulators.items()}


class Reporter:
    """Logs the counters and the running stage's finished tasks every `interval` seconds."""

    def __init__(self, sc: SparkContext, counters: Counters, *, phase: str, total: int, interval: float = 5.0) -> None:
        self.sc = sc
        self.counters = counters
        self.phase = phase
        self.total = total
        self.interval = interval
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{phase}", daemon=True)

    def __enter__(self) -> Reporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.report()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()

    def report(self, level: int = logging.INFO) -> None:
        elapsed = time.monotonic() - self.started
        fields: dict[str, Any] = {"phase": self.phase, "elapsed_s": round(elapsed, 1), "tasks": self._tasks()}
        values = self.counters.values()
        if ROWS in values:
            done = values.pop(ROWS)
            fields.update(
                done=done,
                total=self.total,
                percent=round(100.0 * done / self.total, 1) if self.total else 100.0,
                rows_per_s=round(done / elapsed) if elapsed > 0 else None,
            )
        log("progress", level, **fields, **values)

    def _tasks(self) -> str | None:
        tracker = self.sc.statusTracker()
        stages: list[Any] = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
        running = [s for s in stages if s is not None]
        if not running:
            return None
        return ", ".join(f"stage {s.stageId}: {s.numCompletedTasks}/{s.numTasks}" for s in running)
