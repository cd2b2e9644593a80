"""Five-field cron expressions (Vixie cron syntax) and the local wall-clock minutes they match.

Our own small parser, not croniter or cronsim: both fire a nonexistent 02:30 at 03:00 rather than
at wall time plus the gap, and both fire a repeated local time twice at the clocks going back (checked
with croniter 7.0.0 and cronsim 2.8), which the contract forbids. Parsing is tested against croniter
on plain UTC; the daylight-saving rules live in `recurrence`, which resolves the matched wall times.
"""

from __future__ import annotations

import bisect
import calendar
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

MAX_CRON_LENGTH = 256
# A satisfiable expression matches within eight years: Feb 29 skips 2100, and two restricted day
# fields are ORed, never ANDed, so no weekday-of-Feb-29 rule can need the 28-year cycle.
SEARCH_DAYS = 8 * 366

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS, 1),
    # 7 is Sunday too, folded to 0 after parsing.
    _Field("day of week", 0, 7, _DAYS, 0),
)


@dataclass(frozen=True)
class CronExpression:
    """A parsed expression; weekdays count from Sunday = 0."""

    text: str = field(compare=False)
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # As in Vixie cron, a day field "is *" when its text starts with "*" (so "*/2" counts too).
    any_day: bool
    any_weekday: bool

    def matches_date(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_days and in_weekdays
        return in_days or in_weekdays

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        """Matching naive wall-clock minutes at or after `start`, in order, for up to SEARCH_DAYS days."""
        first = start.replace(second=0, microsecond=0)
        if first < start:
            first += timedelta(minutes=1)
        day = first.date()
        for _ in range(SEARCH_DAYS):
            if self.matches_date(day):
                yield from self._walls_of(day, first)
            day += timedelta(days=1)

    def _walls_of(self, day: date, first: datetime) -> Iterator[datetime]:
        later_day = day > first.date()
        for hour in self.hours[0 if later_day else bisect.bisect_left(self.hours, first.hour) :]:
            from_minute = 0 if later_day or hour > first.hour else bisect.bisect_left(self.minutes, first.minute)
            for minute in self.minutes[from_minute:]:
                yield datetime.combine(day, time(hour, minute))

    def is_satisfiable(self) -> bool:
        """Whether some date matches: "0 0 30 2 *" never does."""
        if not self.any_weekday or self.any_day:
            # Any weekday occurs in every month.
            return True
        # Leap year 2000 lets Feb 29 count.
        return any(day <= calendar.monthrange(2000, month)[1] for month in self.months for day in self.days)


def parse_cron(text: object) -> CronExpression:
    """Parse "minute hour day-of-month month day-of-week"; raises ValueError saying what is wrong."""
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_CRON_LENGTH:
        raise ValueError(f"must be a string of 1 to {MAX_CRON_LENGTH} characters")
    parts = text.split()
    if len(parts) != 5:
        raise ValueError("must have five fields: minute hour day-of-month month day-of-week")
    values = [_parse_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(day % 7 for day in values[4])
    expression = CronExpression(
        text=" ".join(parts),
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=frozenset(values[2]),
        months=frozenset(values[3]),
        weekdays=weekdays,
        any_day=parts[2].startswith("*"),
        any_weekday=parts[4].startswith("*"),
    )
    if not expression.is_satisfiable():
        raise ValueError("never matches a date (the day of month does not exist in those months)")
    return expression


def _parse_field(text: str, spec: _Field) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _parse_item(item, spec)
    return values


def _parse_item(item: str, spec: _Field) -> set[int]:
    span, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isascii() or not step_text.isdigit() or not 1 <= int(step_text) <= spec.high:
            raise ValueError(f"{spec.name}: step {step_text!r} must be an integer from 1 to {spec.high}")
        step = int(step_text)
    if span == "*":
        low, high = spec.low, spec.high
    elif "-" in span:
        first, _, last = span.partition("-")
        low, high = _value(first, spec), _value(last, spec)
        if low > high:
            raise ValueError(f"{spec.name}: range {span!r} runs backwards")
    else:
        low = _value(span, spec)
        # "5/15" means 5-max/15, as in cronie and croniter.
        high = spec.high if slash else low
    return set(range(low, high + 1, step))


def _value(text: str, spec: _Field) -> int:
    upper = text.upper()
    if upper in spec.names:
        return spec.names.index(upper) + spec.name_base
    if not text.isascii() or not text.isdigit() or len(text) > 2 or not spec.low <= int(text) <= spec.high:
        raise ValueError(f"{spec.name}: {text!r} is not a value from {spec.low} to {spec.high}")
    return int(text)
