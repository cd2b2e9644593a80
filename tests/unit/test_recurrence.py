"""Occurrences of recurring schedules against a reference walked minute by minute over a whole year.

The reference knows nothing of zoneinfo or the cron parser: each zone's daylight-saving rules are
written out below, each expression is a hand-written predicate, and the contract's rules are applied
to the walk (a skipped wall time fires at wall + gap, a repeated one at its first pass, each instant
once).
"""

from __future__ import annotations

import bisect
import calendar
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from hourglass.core.cron import parse_cron
from hourglass.core.ids import is_valid_id
from hourglass.core.recurrence import Recurrence, Schedule, next_occurrence, upcoming
from hourglass.core.wallclock import zone
from hypothesis import given, settings
from hypothesis import strategies as st

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A year holding both hemispheres' switches and 29 February 2028.
WINDOW_START = datetime(2027, 7, 1, tzinfo=UTC)
WINDOW_END = datetime(2028, 7, 1, tzinfo=UTC)
# Occurrences are compared this far inside the window, away from the walk's edges.
MARGIN = timedelta(days=2)
ANCHOR = datetime(2020, 1, 1, tzinfo=UTC)


def minutes(instant: datetime) -> int:
    return (instant - EPOCH) // timedelta(minutes=1)


def instant(minute: int) -> datetime:
    return EPOCH + timedelta(minutes=minute)


# --- daylight-saving rules, written out independently of the tz database ------------------------


def sunday(year: int, month: int, index: int) -> datetime:
    """A month's Sunday by index (0: the first, -1: the last), at 00:00 as a UTC-tagged calendar value."""
    days = [day for day in range(1, calendar.monthrange(year, month)[1] + 1) if date(year, month, day).weekday() == 6]
    return datetime(year, month, days[index], tzinfo=UTC)


def h(hours: float) -> timedelta:
    return timedelta(hours=hours)


def transitions(name: str, year: int) -> list[tuple[datetime, int]]:
    """(UTC instant, offset in minutes from then on) for each switch of the year."""
    if name == "America/New_York":  # 2nd Sunday March 02:00 EST; 1st Sunday November 02:00 EDT
        return [(sunday(year, 3, 1) + h(7), -240), (sunday(year, 11, 0) + h(6), -300)]
    if name == "Europe/London":  # last Sundays of March and October, 01:00 UTC
        return [(sunday(year, 3, -1) + h(1), 60), (sunday(year, 10, -1) + h(1), 0)]
    if name == "Australia/Lord_Howe":  # 1st Sunday April 02:00 +11 -> 01:30; 1st Sunday October 02:00 +10:30 -> 02:30
        return [(sunday(year, 4, 0) - h(9), 630), (sunday(year, 10, 0) - h(8.5), 660)]
    if name == "Pacific/Chatham":  # 1st Sunday April 03:45 +13:45 -> 02:45; last Sunday September 02:45 +12:45 -> 03:45
        return [(sunday(year, 4, 0) - h(10), 765), (sunday(year, 9, -1) - h(10), 825)]
    if name == "Asia/Kolkata":
        return []
    raise AssertionError(name)


OFFSET_BEFORE_WINDOW = {
    "America/New_York": -240,
    "Europe/London": 60,
    "Australia/Lord_Howe": 630,
    "Pacific/Chatham": 765,
    "Asia/Kolkata": 330,
}
ZONES = tuple(OFFSET_BEFORE_WINDOW)


@dataclass(frozen=True)
class Walk:
    """For every local wall-clock minute of the window, the UTC minute it fires at."""

    fires: dict[int, int]
    offsets: dict[int, int]


@functools.cache
def walk(name: str) -> Walk:
    switches = sorted(
        (minutes(at), offset)
        for year in (2027, 2028)
        for at, offset in transitions(name, year)
        if WINDOW_START <= at < WINDOW_END
    )
    offset = OFFSET_BEFORE_WINDOW[name]
    fires: dict[int, int] = {}
    offsets: dict[int, int] = {}
    previous_wall = None
    for utc in range(minutes(WINDOW_START), minutes(WINDOW_END)):
        if switches and utc == switches[0][0]:
            previous_offset, offset = offset, switches.pop(0)[1]
            offsets[utc] = offset
            assert previous_wall is not None
            # Clocks went forward: each skipped wall minute fires as if the old offset still held.
            for skipped in range(previous_wall + 1, utc + offset):
                fires[skipped] = skipped - previous_offset
        wall = utc + offset
        # Clocks went back: a repeated wall minute keeps its first pass.
        fires.setdefault(wall, utc)
        previous_wall = wall
    return Walk(fires=fires, offsets=offsets)


@dataclass(frozen=True)
class Case:
    cron: str
    day: Callable[[date], bool]
    times: frozenset[tuple[int, int]]


def every_day(_: date) -> bool:
    return True


CASES = {
    case.cron: case
    for case in (
        Case("30 2 * * *", every_day, frozenset({(2, 30)})),
        Case("0 1 * * *", every_day, frozenset({(1, 0)})),
        Case("30 1 * * *", every_day, frozenset({(1, 30)})),
        Case("45 2 * * *", every_day, frozenset({(2, 45)})),
        # In Lord Howe's half-hour gap 02:20 fires at 02:50, after the real 02:40.
        Case("20,40 2 * * *", every_day, frozenset({(2, 20), (2, 40)})),
        Case("*/15 1-3 * * *", every_day, frozenset((hour, m) for hour in (1, 2, 3) for m in (0, 15, 30, 45))),
        Case("0 12 29 2 *", lambda d: (d.month, d.day) == (2, 29), frozenset({(12, 0)})),
        Case("0 0 31 * *", lambda d: d.day == 31, frozenset({(0, 0)})),
        Case("0 0 13 * FRI", lambda d: d.day == 13 or d.weekday() == 4, frozenset({(0, 0)})),
        Case(
            "*/5 * * * SUN",
            lambda d: d.weekday() == 6,
            frozenset((hour, m) for hour in range(24) for m in range(0, 60, 5)),
        ),
    )
}


@functools.cache
def reference(name: str, cron: str) -> tuple[int, ...]:
    """Sorted UTC minutes of every occurrence inside the window, from the walk alone."""
    case, fires = CASES[cron], walk(name).fires
    low, high = minutes(WINDOW_START + MARGIN), minutes(WINDOW_END - MARGIN)
    found = set()
    day = (WINDOW_START - timedelta(days=1)).date()
    while day <= WINDOW_END.date():
        if case.day(day):
            midnight = minutes(datetime.combine(day, datetime.min.time(), tzinfo=UTC))
            for hour, minute in case.times:
                utc = fires.get(midnight + hour * 60 + minute)
                if utc is not None and low <= utc <= high:
                    found.add(utc)
        day += timedelta(days=1)
    return tuple(sorted(found))


def computed(name: str, cron: str) -> list[int]:
    recurrence = Recurrence(cron=parse_cron(cron), timezone=name)
    after, high = WINDOW_START + MARGIN - timedelta(microseconds=1), WINDOW_END - MARGIN
    found = []
    while (following := next_occurrence(recurrence, after, anchor=ANCHOR)) is not None and following <= high:
        found.append(minutes(following))
        after = following
    return found


@pytest.mark.parametrize("name", ZONES)
def test_written_out_rules_agree_with_the_bundled_tz_database(name):
    # Guards the reference itself: a wrong rule here would make the comparisons below meaningless.
    tz, switches = zone(name), walk(name).offsets
    offset = OFFSET_BEFORE_WINDOW[name]
    for utc in range(minutes(WINDOW_START), minutes(WINDOW_END), 15):
        offset = next((switches[m] for m in range(utc - 14, utc + 1) if m in switches), offset)
        assert instant(utc).astimezone(tz).utcoffset() == timedelta(minutes=offset), instant(utc)


@pytest.mark.parametrize("cron", list(CASES))
@pytest.mark.parametrize("name", ZONES)
def test_every_occurrence_of_the_year_matches_the_reference(name, cron):
    expected = reference(name, cron)
    assert expected, "the case must fire at least once in the window"
    assert computed(name, cron) == list(expected)


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(ZONES),
    cron=st.sampled_from(list(CASES)),
    offset=st.integers(0, int((WINDOW_END - WINDOW_START - 4 * MARGIN) / timedelta(microseconds=1))),
)
def test_next_occurrence_after_any_instant_is_the_reference_successor(name, cron, offset):
    after = WINDOW_START + MARGIN + timedelta(microseconds=offset)
    expected = reference(name, cron)
    got = next_occurrence(Recurrence(cron=parse_cron(cron), timezone=name), after, anchor=ANCHOR)
    # minutes() floors, so this is the first reference minute strictly after `after`.
    index = bisect.bisect_right(expected, minutes(after))
    if index == len(expected):
        assert got is not None and got > WINDOW_END - MARGIN
    else:
        assert got == instant(expected[index])


# --- the contract's examples, by hand ------------------------------------------------------------


def occurrences(cron: str, name: str, after: datetime, count: int = 3) -> list[datetime]:
    return upcoming(Recurrence(cron=parse_cron(cron), timezone=name), after, anchor=ANCHOR, count=count)


def test_a_nonexistent_local_time_fires_at_wall_time_plus_the_gap():
    # New York, 12 March 2028: 02:00 EST -> 03:00 EDT, so 02:30 fires at 03:30 EDT.
    got = occurrences("30 2 * * *", "America/New_York", datetime(2028, 3, 11, 12, tzinfo=UTC), 2)
    assert got == [datetime(2028, 3, 12, 7, 30, tzinfo=UTC), datetime(2028, 3, 13, 6, 30, tzinfo=UTC)]


def test_a_repeated_local_time_fires_once_at_the_first_pass():
    # New York, 7 November 2027: 01:30 happens at 05:30 and 06:30 UTC.
    got = occurrences("30 1 * * *", "America/New_York", datetime(2027, 11, 6, 12, tzinfo=UTC), 2)
    assert got == [datetime(2027, 11, 7, 5, 30, tzinfo=UTC), datetime(2027, 11, 8, 6, 30, tzinfo=UTC)]


def test_the_second_pass_of_a_repeated_hour_does_not_fire():
    after = datetime(2027, 11, 7, 6, 10, tzinfo=UTC)  # 01:10 EST, the second 01:10
    got = occurrences("*/15 1-3 * * *", "America/New_York", after, 1)
    assert got == [datetime(2027, 11, 7, 7, 0, tzinfo=UTC)]  # 02:00 EST


def test_a_half_hour_gap_shifts_by_half_an_hour():
    # Lord Howe, 3 October 2027: 02:00 +10:30 -> 02:30 +11, so 02:15 fires at 02:45 +11.
    got = occurrences("15 2 * * *", "Australia/Lord_Howe", datetime(2027, 10, 2, tzinfo=UTC), 1)
    assert got == [datetime(2027, 10, 2, 15, 45, tzinfo=UTC)]


def test_a_shifted_gap_time_fires_after_a_real_time_that_follows_it_on_the_clock():
    # Lord Howe, 3 October 2027: 02:20 is skipped and fires at 02:50 +11, after the real 02:40.
    got = occurrences("20,40 2 * * *", "Australia/Lord_Howe", datetime(2027, 10, 2, tzinfo=UTC), 2)
    assert got == [datetime(2027, 10, 2, 15, 40, tzinfo=UTC), datetime(2027, 10, 2, 15, 50, tzinfo=UTC)]


def test_a_wall_time_in_the_gap_and_its_shifted_twin_fire_once():
    # 02:00 and 03:00 in New York on 12 March 2028 are both 07:00 UTC.
    got = occurrences("0 2,3 * * *", "America/New_York", datetime(2028, 3, 12, 6, tzinfo=UTC), 2)
    assert got == [datetime(2028, 3, 12, 7, tzinfo=UTC), datetime(2028, 3, 13, 6, tzinfo=UTC)]


def test_cron_without_a_timezone_runs_in_utc():
    got = occurrences("0 9 * * MON-FRI", "UTC", datetime(2026, 11, 20, 9, tzinfo=UTC), 2)  # a Friday
    assert got == [datetime(2026, 11, 23, 9, tzinfo=UTC), datetime(2026, 11, 24, 9, tzinfo=UTC)]


def test_weekday_mornings_in_london_follow_summer_time():
    got = occurrences("0 9 * * MON-FRI", "Europe/London", datetime(2027, 3, 26, 10, tzinfo=UTC), 1)
    assert got == [datetime(2027, 3, 29, 8, tzinfo=UTC)]  # Monday 09:00 BST


# --- every, bounds and the schedule type -------------------------------------------------------


def every(seconds: int, **bounds: datetime) -> Recurrence:
    return Recurrence(every=seconds, **bounds)


T0 = datetime(2026, 11, 23, 10, 0, 0, 250000, tzinfo=UTC)


def test_every_counts_from_the_anchor_and_is_strictly_after():
    assert next_occurrence(every(60), T0 + timedelta(seconds=60), anchor=T0) == T0 + timedelta(seconds=120)


def test_every_first_fires_at_the_anchor_when_asked_before_it():
    assert next_occurrence(every(3600), T0 - timedelta(days=1), anchor=T0) == T0


def test_every_counts_from_start_at_when_given():
    start = T0 + timedelta(hours=5, seconds=7)
    got = upcoming(every(3600, start_at=start), T0, anchor=T0, count=2)
    assert got == [start, start + timedelta(hours=1)]


def test_every_keeps_elapsed_time_across_daylight_saving():
    start = datetime(2027, 11, 6, 12, tzinfo=UTC)
    got = upcoming(Recurrence(every=86400, timezone="America/New_York", start_at=start), start, anchor=T0, count=1)
    assert got == [start + timedelta(days=1)]


def test_cron_skips_occurrences_before_start_at():
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    recurrence = Recurrence(cron=parse_cron("0 9 * * *"), start_at=start)
    assert next_occurrence(recurrence, T0, anchor=T0) == start


def test_nothing_occurs_after_end_at():
    recurrence = Recurrence(cron=parse_cron("0 * * * *"), end_at=datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    got = upcoming(recurrence, T0, anchor=T0, count=3)
    assert got == [datetime(2026, 11, 23, 11, tzinfo=UTC), datetime(2026, 11, 23, 12, tzinfo=UTC)]


@pytest.mark.parametrize("fields", [{}, {"every": 60, "cron": parse_cron("* * * * *")}, {"every": 0}])
def test_recurrence_needs_exactly_one_valid_rule(fields):
    with pytest.raises(ValueError):
        Recurrence(**fields)


SCHEDULE = Schedule(
    queue="orders",
    name="daily",
    recurrence=Recurrence(cron=parse_cron("0 9 * * *"), timezone="Europe/London"),
    body={"report": "daily"},
    created_at=T0,
)


def test_schedule_next_due_lists_three_occurrences():
    assert SCHEDULE.next_due(T0) == [datetime(2026, 11, d, 9, tzinfo=UTC) for d in (24, 25, 26)]


def test_occurrence_ids_repeat_for_the_same_occurrence():
    at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    assert SCHEDULE.occurrence_id(at) == SCHEDULE.occurrence_id(at + timedelta(0))
    assert is_valid_id(SCHEDULE.occurrence_id(at))


@pytest.mark.parametrize(
    "other",
    [
        Schedule(**{**SCHEDULE.__dict__, "queue": "billing"}),
        Schedule(**{**SCHEDULE.__dict__, "name": "weekly"}),
        Schedule(**{**SCHEDULE.__dict__, "version": 2}),
    ],
)
def test_occurrence_ids_differ_by_queue_name_and_version(other):
    at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    assert other.occurrence_id(at) != SCHEDULE.occurrence_id(at)


def test_occurrence_ids_differ_by_instant():
    at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    assert SCHEDULE.occurrence_id(at) != SCHEDULE.occurrence_id(at + timedelta(minutes=1))


def test_recurrence_rejects_an_unknown_zone():
    with pytest.raises(ValueError):
        Recurrence(every=60, timezone="Mars/Olympus")


@settings(max_examples=200, deadline=None)
@given(
    seconds=st.integers(60, 10 * 365 * 86400),
    anchor_us=st.integers(0, 10**15),
    after_us=st.integers(-(10**14), 10**16),
)
def test_every_gives_the_first_anchored_multiple_strictly_after(seconds, anchor_us, after_us):
    anchor = EPOCH + timedelta(microseconds=anchor_us)
    after = anchor + timedelta(microseconds=after_us)
    got = next_occurrence(Recurrence(every=seconds), after, anchor=anchor)
    assert got is not None
    steps, remainder = divmod(got - anchor, timedelta(seconds=seconds))
    assert remainder == timedelta(0) and steps >= 0
    assert got > after and (steps == 0 or got - timedelta(seconds=seconds) <= after)
