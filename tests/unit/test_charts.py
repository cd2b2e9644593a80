"""The console's charts: ranges and periods, and the per-minute figures the local runtime keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.adapters.metric_history import KEEP_MINUTES, MinuteHistory
from hourglass.adapters.metrics import Metrics
from hourglass.core import charts
from hourglass.errors import ValidationError

NOW = datetime(2026, 11, 21, 10, 30, 20, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now.timestamp()


def test_the_hour_is_sixty_minutes_ending_with_the_current_one() -> None:
    win = charts.window({"range": "hour"}, NOW)
    assert (win.start, win.end, win.period, win.points) == (
        datetime(2026, 11, 21, 9, 31, tzinfo=UTC), datetime(2026, 11, 21, 10, 31, tzinfo=UTC), 60, 60,
    )  # fmt: skip


def test_the_day_is_counted_by_ten_minutes() -> None:
    win = charts.window({"range": "day"}, NOW)
    assert (win.end, win.period, win.points) == (datetime(2026, 11, 21, 10, 40, tzinfo=UTC), 600, 144)


def test_another_range_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError) as refused:
        charts.window({"range": "week"}, NOW)
    assert refused.value.field == "range"


def test_the_history_sums_counts_and_takes_lateness_percentiles_per_period() -> None:
    clock = Clock()
    metrics = Metrics(emit=False, history=MinuteHistory(clock))
    for ms in range(1, 101):
        metrics.lateness(float(ms), queue="orders")
        metrics.count("Delivered", queue="orders")
    metrics.count("Failed", 2, queue="orders")
    metrics.count("Delivered", queue="other")
    clock.now = NOW - timedelta(minutes=5)
    metrics.count("Delivered", 3, queue="orders")
    win = charts.window(None, NOW)
    doc = charts.chart_doc("orders", win, metrics.history.series("orders", win), "local")  # type: ignore[union-attr]
    series = doc["series"]
    assert (series["delivered"][-1], series["failed"][-1], series["delivered"][-6], sum(series["delivered"])) == (
        100.0, 2.0, 3.0, 103.0,
    )  # fmt: skip
    assert (series["lateness_p50_ms"][-1], series["lateness_p99_ms"][-1], series["lateness_p50_ms"][0]) == (
        51.0, 100.0, None,
    )  # fmt: skip
    assert (doc["times"][-1], doc["source"]) == ("2026-11-21T10:30:00.000Z", "local")


def test_the_history_forgets_what_is_older_than_a_day() -> None:
    clock = Clock()
    history = MinuteHistory(clock)
    history.count("Delivered", 1, "orders")
    clock.now = NOW + timedelta(minutes=KEEP_MINUTES + 1)
    history.count("Delivered", 1, "orders")
    win = charts.window({"range": "day"}, NOW)
    assert sum(v or 0 for v in history.series("orders", win)["delivered"]) == 0
