"""The report's PNG charts (matplotlib, Agg backend), drawn from small tables already collected."""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on a cluster or in CI

import matplotlib.pyplot as plt  # after use(): the backend is chosen first

MAX_SERIES = 8
STEPS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
_SIZE = (9.0, 4.5)


def lateness_histogram(bins: Sequence[Any]) -> bytes:
    """Bars per lateness bin; `bins` rows have lower_s, upper_s, messages."""
    labels = [_bin_label(row.lower_s, row.upper_s) for row in bins]
    counts = [row.messages for row in bins]
    figure, axes = plt.subplots(figsize=_SIZE)
    bars = axes.bar(range(len(counts)), counts, color="#3b6ea5")
    axes.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=8)
    axes.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    axes.set_xlabel("lateness (delivered_at - max(due_at, created_at))")
    axes.set_ylabel("delivered messages")
    axes.set_title("Lateness of delivered messages")
    return _png(figure)


def deliveries_over_time(rows: Sequence[Any], unit: str) -> bytes:
    """One line per queue (the busiest few, the rest summed as "other"); rows: queue, period, delivered.
    A period without deliveries is plotted as zero, never bridged by a line."""
    per_queue: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        totals[row.queue] += row.delivered
    busiest = set(sorted(totals, key=lambda q: (-totals[q], q))[:MAX_SERIES])
    for row in rows:
        # Spark hands timestamps back as naive local times; astimezone reads them as such.
        per_queue[row.queue if row.queue in busiest else "other"][row.period.astimezone(UTC)] += row.delivered
    figure, axes = plt.subplots(figsize=_SIZE)
    times: list[Any] = periods({t for counts in per_queue.values() for t in counts}, unit)
    for queue in sorted(per_queue):
        counts = per_queue[queue]  # matplotlib's date converter takes the datetimes
        axes.plot(times, [counts.get(t, 0) for t in times], marker="o", markersize=3, label=queue)
    if per_queue:
        axes.legend(fontsize=8)
    axes.set_ylabel(f"delivered per {unit}")
    axes.set_title(f"Deliveries per {unit} (UTC)")
    figure.autofmt_xdate()
    return _png(figure)


def periods(seen: set[datetime], unit: str, most: int = 20_000) -> list[datetime]:
    """Every period from the first seen to the last, one `unit` apart (at most `most`; beyond that only
    those seen, so that a sparse range of years is not drawn minute by minute)."""
    if not seen:
        return []
    step = STEPS[unit]
    first, last = min(seen), max(seen)
    if (last - first) / step >= most:
        return sorted(seen)
    return [first + step * i for i in range(int((last - first) / step) + 1)]


def _bin_label(lower: float, upper: float | None) -> str:
    return f">= {lower:g} s" if upper is None else f"{lower:g}-{upper:g} s"


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()
