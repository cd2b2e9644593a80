"""A queue's figures over time for the console's charts: the ranges, their periods and the document."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from hourglass.core.timestamps import format_rfc3339
from hourglass.errors import ValidationError

# Per-period figures by name: counters as sums, lateness as percentiles (None: no delivery in the period).
Series = dict[str, list[float | None]]

# The metrics (adapters/metrics.py names) a chart sums per period, and their names in the document.
COUNTERS = {
    "Delivered": "delivered",
    "Failed": "failed",
    "Expired": "expired",
    "Cancelled": "cancelled",
    "Retried": "retried",
    "Scheduled": "scheduled",
    "Redelivered": "redelivered",
}
PERCENTILES = {"p50": "lateness_p50_ms", "p99": "lateness_p99_ms"}


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    period: int

    @property
    def points(self) -> int:
        return int((self.end - self.start).total_seconds()) // self.period


class SeriesReader(Protocol):
    """Where a queue's figures come from: CloudWatch as deployed, the runtime's own memory locally."""

    source: str

    def series(self, queue: str, win: Window) -> Series: ...


# The last hour minute by minute; the last day by 10 minutes.
RANGES = {"hour": (3600, 60), "day": (86400, 600)}


def window(params: dict[str, str] | None, now: datetime) -> Window:
    """The range asked for (`range=hour|day`, hour by default), ending with the period `now` falls in."""
    name = (params or {}).get("range", "hour")
    if name not in RANGES:
        raise ValidationError("range", "must be hour or day")
    seconds, period = RANGES[name]
    end_s = (int(now.timestamp()) // period + 1) * period
    end = datetime.fromtimestamp(end_s, tz=now.tzinfo)
    return Window(end - timedelta(seconds=seconds), end, period)


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 1)


def percentile_series(values: list[list[float]]) -> Series:
    """Lateness p50 and p99 of each period's values."""
    return {
        PERCENTILES["p50"]: [_percentile(v, 0.5) for v in values],
        PERCENTILES["p99"]: [_percentile(v, 0.99) for v in values],
    }


def chart_doc(queue: str, win: Window, series: Series, source: str) -> dict[str, Any]:
    """`GET /v1/queues/{queue}/metrics`: one time per period, each series one value per time."""
    times = [format_rfc3339(win.start + timedelta(seconds=i * win.period)) for i in range(win.points)]
    wanted = [*COUNTERS.values(), *PERCENTILES.values()]
    padded = {name: (list(series.get(name, [])) + [None] * win.points)[: win.points] for name in wanted}
    for name in COUNTERS.values():
        padded[name] = [0.0 if v is None else v for v in padded[name]]
    return {"queue": queue, "source": source, "period": win.period, "times": times, "series": padded}
