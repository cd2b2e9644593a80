"""Delivery windows (core.window) against a brute-force reference: openings found by reading offsets, then a
minute-by-minute scan, over many zones (half-hour and 45-minute offsets and shifts, zones without DST)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hourglass.core import validation
from hourglass.core.wallclock import zone
from hourglass.core.window import Window, from_doc, opening, to_doc
from hourglass.errors import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

ZONES = [
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/New_York",
    "Europe/London",
    "Europe/Dublin",  # "negative" DST in the tz database
    "Antarctica/Troll",  # a 2-hour DST shift
    "America/St_Johns",  # -03:30
    "Asia/Kathmandu",  # +05:45, no DST
    "Asia/Kolkata",  # no DST
    "Asia/Tokyo",  # no DST
    "Pacific/Kiritimati",  # +14, no DST
    "America/Sao_Paulo",  # DST abolished in 2019
    "Africa/Casablanca",  # DST suspended for Ramadan
    "UTC",
]
MINUTE = timedelta(minutes=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _minutes(instant: datetime) -> int:
    return (instant - EPOCH) // MINUTE


def _wall_minutes(instant: datetime, tz: ZoneInfo) -> int:
    """The local wall time as minutes since the epoch's wall clock, from the offset alone (no fold)."""
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return _minutes(instant + offset)


def reference_instant(day: date, at: time, tz: ZoneInfo) -> int:
    """The schedules' rule, found by trying offsets: the earliest instant showing the wall time, or (in a gap)
    the wall time under the offset in force before the gap."""
    wall = _minutes(datetime.combine(day, at, tzinfo=UTC))
    offsets = {_wall_minutes(EPOCH + probe * MINUTE, tz) - probe for probe in (wall - 1800, wall, wall + 1800)}
    shown = [wall - offset for offset in offsets if _wall_minutes(EPOCH + (wall - offset) * MINUTE, tz) == wall]
    if shown:
        return min(shown)
    before = _wall_minutes(EPOCH + (wall - 1800) * MINUTE, tz) - (wall - 1800)
    return wall - before


def reference_next_open(window: Window, at: datetime) -> datetime:
    """Minute by minute from `at` (a whole minute) until an instant lies inside an opening's interval."""
    tz = zone(window.timezone)
    start = _minutes(at)
    spans = []
    first = at.astimezone(tz).date() - timedelta(days=3)
    for offset in range(7 * (len(window.exclude) + 2) + 3):
        day = first + timedelta(days=offset)
        if day.weekday() not in window.days or day in window.exclude:
            continue
        close_day = day + timedelta(days=1) if window.end <= window.start else day
        opens, closes = reference_instant(day, window.start, tz), reference_instant(close_day, window.end, tz)
        spans.append((opens, closes))
    minute = start
    while not any(opens <= minute < closes for opens, closes in spans):
        minute += 1
        assert minute - start < 60 * 24 * 7 * (len(window.exclude) + 3), "never opened"
    return EPOCH + minute * MINUTE


def _times() -> st.SearchStrategy[time]:
    return st.builds(time, st.integers(0, 23), st.sampled_from([0, 1, 15, 30, 45, 59]))


@st.composite
def windows(draw: st.DrawFn) -> Window:
    zone_name = draw(st.sampled_from(ZONES))
    days = draw(st.frozensets(st.integers(0, 6), min_size=1))
    base = draw(st.dates(date(2024, 1, 1), date(2031, 12, 31)))
    exclude = draw(st.frozensets(st.integers(0, 20).map(lambda n: base + timedelta(days=n)), max_size=4))
    return Window(zone_name, days, draw(_times()), draw(_times()), exclude)


def _transition_days(zone_name: str) -> list[date]:
    """The local dates of the zone's offset changes in 2025-2027 (from a daily probe of its offset)."""
    tz = zone(zone_name)
    probes = [datetime(2025, 1, 1, 12, tzinfo=UTC) + timedelta(days=n) for n in range(3 * 365)]
    offsets = [probe.astimezone(tz).utcoffset() for probe in probes]
    return [probes[n].astimezone(tz).date() for n in range(1, len(probes)) if offsets[n] != offsets[n - 1]]


TRANSITIONS = {name: days for name in ZONES if (days := _transition_days(name))}


@st.composite
def near_transitions(draw: st.DrawFn) -> tuple[Window, datetime]:
    """A window whose opening or closing falls in the small hours of a day the clocks change, and an instant
    within two days of it: where the daylight-saving rules decide the answer."""
    zone_name = draw(st.sampled_from(sorted(TRANSITIONS)))
    day = draw(st.sampled_from(TRANSITIONS[zone_name]))
    small_hours = st.builds(time, st.integers(0, 4), st.sampled_from([0, 15, 30, 45]))
    edges = draw(st.tuples(small_hours, st.one_of(small_hours, _times())))
    start, end = edges if draw(st.booleans()) else edges[::-1]
    window = Window(zone_name, draw(st.frozensets(st.integers(0, 6), min_size=5)), start, end)
    at = datetime.combine(day, time(0), tzinfo=UTC) + draw(st.integers(-48 * 60, 48 * 60)) * MINUTE
    return window, at


@settings(max_examples=100, deadline=None)
@given(near_transitions())
def test_next_open_matches_the_reference_around_clock_changes(case: tuple[Window, datetime]) -> None:
    window, at = case
    assert window.next_open(at) == reference_next_open(window, at)


@st.composite
def instants(draw: st.DrawFn) -> datetime:
    start = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=draw(st.integers(0, 3 * 365)))
    return start + draw(st.integers(0, 48 * 60)) * MINUTE


@settings(max_examples=50, deadline=None)
@given(windows(), instants())
def test_next_open_matches_the_minute_by_minute_reference(window: Window, at: datetime) -> None:
    assert window.next_open(at) == reference_next_open(window, at)


@settings(max_examples=30, deadline=None)
@given(windows(), instants(), st.integers(0, 59))
def test_the_opening_is_never_before_its_due_time_and_always_open(window: Window, at: datetime, seconds: int) -> None:
    due = at + timedelta(seconds=seconds, microseconds=seconds * 7)
    found = window.next_open(due)
    assert found >= due
    assert window.is_open(found)
    assert window.next_open(found) == found


@settings(max_examples=20, deadline=None)
@given(windows())
def test_a_window_reads_back_as_stored(window: Window) -> None:
    assert from_doc(to_doc(window)) == window
    assert validation.window(to_doc(window)) == window


NEW_YORK = "America/New_York"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_inside_the_window_the_due_time_stands() -> None:
    business = Window("Europe/Paris", frozenset(range(5)), time(9), time(18))
    assert business.next_open(_utc("2026-11-25T10:00:00")) == _utc("2026-11-25T10:00:00")  # 11:00 in Paris


def test_after_closing_it_waits_for_the_next_listed_day() -> None:
    business = Window("Europe/Paris", frozenset(range(5)), time(9), time(18))
    friday_evening = _utc("2026-11-27T18:30:00")
    assert business.next_open(friday_evening) == _utc("2026-11-30T08:00:00")  # Monday 09:00 in Paris


def test_an_excluded_date_opens_no_window() -> None:
    daily = Window("UTC", frozenset(range(7)), time(9), time(17), frozenset({date(2026, 12, 25)}))
    assert daily.next_open(_utc("2026-12-24T18:00:00")) == _utc("2026-12-26T09:00:00")


def test_a_window_spanning_midnight_belongs_to_the_day_it_opens() -> None:
    nights = Window("UTC", frozenset({4}), time(22), time(6))  # Friday 22:00 to Saturday 06:00
    assert nights.is_open(_utc("2026-11-28T05:59:00"))  # Saturday early morning
    assert nights.next_open(_utc("2026-11-28T06:00:00")) == _utc("2026-12-04T22:00:00")


def test_equal_from_and_to_is_the_whole_day() -> None:
    weekdays = Window("UTC", frozenset(range(5)), time(0), time(0))
    assert weekdays.next_open(_utc("2026-11-28T12:00:00")) == _utc("2026-11-30T00:00:00")
    assert weekdays.is_open(_utc("2026-11-27T23:59:59"))


def test_an_opening_in_the_spring_gap_moves_forward_by_the_gap() -> None:
    early = Window(NEW_YORK, frozenset(range(7)), time(2, 30), time(5))
    # 2026-03-08 02:30 does not exist in New York: the window opens at 03:30 EDT (07:30 UTC).
    assert early.next_open(_utc("2026-03-08T05:00:00")) == _utc("2026-03-08T07:30:00")


def test_a_repeated_opening_counts_once_at_the_first() -> None:
    early = Window(NEW_YORK, frozenset(range(7)), time(1, 30), time(1, 45))
    # 2026-11-01 01:30 happens twice in New York: the window is the first 01:30-01:45 (EDT) only.
    assert early.next_open(_utc("2026-11-01T05:00:00")) == _utc("2026-11-01T05:30:00")
    assert early.next_open(_utc("2026-11-01T05:45:00")) == _utc("2026-11-02T06:30:00")


def test_lord_howe_half_hour_shift() -> None:
    nightly = Window("Australia/Lord_Howe", frozenset(range(7)), time(2, 15), time(3))
    # 2026-10-04 02:00 -> 02:30 (+10:30 -> +11): 02:15 does not exist, it opens at 02:45 local (+11).
    assert nightly.next_open(_utc("2026-10-03T12:00:00")) == _utc("2026-10-03T15:45:00")


def test_no_window_costs_nothing() -> None:
    at = _utc("2026-11-25T10:00:00")
    assert opening(None, at) is at


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"from": "9:00", "to": "18:00"}, "window.from"),
        ({"from": "09:00", "to": "24:00"}, "window.to"),
        ({"from": "09:00"}, "window.to"),
        ({"from": "09:00", "to": "18:00", "days": ["monday"]}, "window.days[0]"),
        ({"from": "09:00", "to": "18:00", "days": []}, "window.days"),
        ({"from": "09:00", "to": "18:00", "timezone": "Mars/Olympus"}, "window.timezone"),
        ({"from": "09:00", "to": "18:00", "exclude_dates": ["2026-02-30"]}, "window.exclude_dates[0]"),
        ({"from": "09:00", "to": "18:00", "exclude_dates": "2026-12-25"}, "window.exclude_dates"),
        ({"from": "09:00", "to": "18:00", "hours": 3}, "window.hours"),
        ("09:00-18:00", "window"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(doc: object, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        validation.window(doc)
    assert raised.value.field == field
