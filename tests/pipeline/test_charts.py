"""The report's charts: the deliveries-over-time series has a point for every period, zero when empty."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.charts import periods

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_an_empty_minute_between_two_deliveries_is_a_period_of_its_own() -> None:
    assert periods({T0, T0 + timedelta(minutes=3)}, "minute") == [T0 + timedelta(minutes=i) for i in range(4)]


def test_a_range_too_long_to_draw_period_by_period_keeps_only_the_periods_seen() -> None:
    seen = {T0, T0 + timedelta(days=400)}
    assert periods(seen, "minute") == sorted(seen)
