"""Delivery windows: when attempts may start, in a recipient's own time zone (days, from/to, exclusion dates).

Each listed day that is not excluded opens the window at `from` and closes it at `to` (the next day when `to`
is not later than `from`), both resolved by `wallclock.resolve`: a nonexistent time moves forward by the gap,
a repeated one is its first instant. An opening at or after `at` is `next_open(at)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from hourglass.core.wallclock import DEFAULT_ZONE, resolve, wall_time, zone

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_EXCLUDE_DATES = 366
# Intervals of days this far before `at`'s local date can still contain it (a 24-hour window that spans
# midnight, lengthened by a transition of up to a day, as Samoa's in 2011).
_LOOKBACK_DAYS = 3
_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Window:
    """`days`: weekday numbers (0 = Monday); `start`/`end`: the local `from`/`to`; `end` <= `start` spans midnight
    (equal: 24 hours). `exclude`: local dates on which no window opens."""

    timezone: str = DEFAULT_ZONE
    days: frozenset[int] = frozenset(range(7))
    start: time = time(0)
    end: time = time(0)
    exclude: frozenset[date] = frozenset()

    def __post_init__(self) -> None:
        zone(self.timezone)
        if not self.days or not self.days <= frozenset(range(7)):
            raise ValueError("days must name at least one weekday")

    def interval(self, day: date) -> tuple[datetime, datetime] | None:
        """The window opening on local date `day` as UTC instants [open, close), or None if it does not open then
        (an interval that a transition made empty is None too)."""
        if day.weekday() not in self.days or day in self.exclude:
            return None
        tz = zone(self.timezone)
        opens = resolve(datetime.combine(day, self.start), tz)
        closes = resolve(datetime.combine(day + _ONE_DAY if self.end <= self.start else day, self.end), tz)
        return (opens, closes) if opens < closes else None

    def next_open(self, at: datetime) -> datetime:
        """The first instant at or after `at` (aware) inside the window: `at` itself when it is open."""
        day = wall_time(at, zone(self.timezone)).date() - timedelta(days=_LOOKBACK_DAYS)
        # Openings follow their dates (the same wall time a day later never resolves earlier), so the first
        # interval opening after `at` is the next opening, and every interval containing `at` comes before it.
        # Finitely many exclusions: the scan ends within their count of weeks.
        for _ in range(7 * (len(self.exclude) + 2) + _LOOKBACK_DAYS):
            span = self.interval(day)
            day += _ONE_DAY
            if span is None:
                continue
            opens, closes = span
            if opens <= at < closes:
                return at
            if opens > at:
                return opens
        raise ValueError("the window never opens")  # unreachable: a weekday in 7 days opens it

    def is_open(self, at: datetime) -> bool:
        return self.next_open(at) == at


def opening(window: Window | None, at: datetime) -> datetime:
    """When an attempt due at `at` may start: `at` without a window (nothing computed), else the next opening."""
    return at if window is None else window.next_open(at)


def to_doc(window: Window | None) -> dict[str, Any] | None:
    """The contract's form: {"timezone", "days", "from", "to", "exclude_dates"} (days in week order, dates sorted)."""
    if window is None:
        return None
    return {
        "timezone": window.timezone,
        "days": [DAYS[number] for number in sorted(window.days)],
        "from": window.start.strftime("%H:%M"),
        "to": window.end.strftime("%H:%M"),
        "exclude_dates": [day.isoformat() for day in sorted(window.exclude)],
    }


def from_doc(doc: Any) -> Window | None:
    """A window as `to_doc` stored it (validated when it was written: `validation.window` reads requests)."""
    if doc is None:
        return None
    return Window(
        timezone=doc["timezone"],
        days=frozenset(DAYS.index(name) for name in doc["days"]),
        start=time.fromisoformat(doc["from"]),
        end=time.fromisoformat(doc["to"]),
        exclude=frozenset(date.fromisoformat(text) for text in doc["exclude_dates"]),
    )
