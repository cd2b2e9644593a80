"""Cron parsing and wall-time matching, checked by hand and against cronsim as a reference."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice

import pytest
from cronsim import CronSim
from hourglass.core.cron import parse_cron
from hypothesis import given, settings
from hypothesis import strategies as st


def walls(expression: str, start: datetime, count: int) -> list[datetime]:
    return list(islice(parse_cron(expression).walls_from(start), count))


def test_month_and_weekday_names_parse_case_insensitively():
    assert parse_cron("0 9 * jan-Mar Mon-FRI") == parse_cron("0 9 * 1-3 1-5")


def test_seven_and_zero_both_mean_sunday():
    assert parse_cron("0 0 * * 7").weekdays == parse_cron("0 0 * * SUN").weekdays == frozenset({0})


def test_lists_ranges_and_steps_combine():
    assert parse_cron("1,10-20/5,*/30 * * * *").minutes == (0, 1, 10, 15, 20, 30)


def test_single_value_with_step_runs_to_the_field_maximum():
    assert parse_cron("50/4 * * * *").minutes == (50, 54, 58)


def test_weekday_range_up_to_seven_includes_sunday():
    assert parse_cron("0 0 * * 5-7").weekdays == frozenset({5, 6, 0})


def test_both_day_fields_restricted_match_either():
    # 2026: Friday the 6th and Friday the 13th, and the 13th of a non-Friday month (January).
    found = walls("0 0 13 * FRI", datetime(2026, 1, 12), 3)
    assert found == [datetime(2026, 1, 13), datetime(2026, 1, 16), datetime(2026, 1, 23)]


def test_a_star_day_of_month_makes_the_weekday_the_only_day_rule():
    found = walls("0 0 * * MON", datetime(2026, 3, 1), 2)
    assert found == [datetime(2026, 3, 2), datetime(2026, 3, 9)]


def test_a_starred_step_in_day_of_month_counts_as_star_as_in_vixie_cron():
    # "*/2" begins with "*", so the day fields are ANDed: odd days that are Mondays.
    found = walls("0 0 */2 * MON", datetime(2026, 3, 1), 2)
    assert found == [datetime(2026, 3, 9), datetime(2026, 3, 23)]


def test_february_29_is_found_in_the_next_leap_year():
    assert walls("0 12 29 2 *", datetime(2026, 3, 1), 2) == [datetime(2028, 2, 29, 12), datetime(2032, 2, 29, 12)]


def test_day_31_skips_short_months():
    found = walls("0 0 31 * *", datetime(2026, 4, 1), 3)
    assert found == [datetime(2026, 5, 31), datetime(2026, 7, 31), datetime(2026, 8, 31)]


def test_walls_start_at_the_next_whole_minute():
    assert walls("* * * * *", datetime(2026, 1, 1, 10, 0, 0, 1), 1) == [datetime(2026, 1, 1, 10, 1)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "* * * *",
        "* * * * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-1 * * * *",
        "*/0 * * * *",
        "*/61 * * * *",
        "a * * * *",
        "* * * FOO *",
        "* * * * MON-",
        "1,,2 * * * *",
        "@daily",
        "٣ * * * *",
        "0 0 30 2 *",
        "0 0 31 4,6,9,11 *",
        "x" * 300,
        None,
        5,
    ],
)
def test_bad_expressions_are_rejected(text):
    with pytest.raises(ValueError):
        parse_cron(text)


def test_a_day_that_no_month_has_is_satisfiable_when_a_weekday_is_also_given():
    # Vixie ORs two restricted day fields, so Feb 30 OR any Monday matches Mondays.
    assert walls("0 0 30 2 MON", datetime(2026, 2, 1), 1) == [datetime(2026, 2, 2)]


# --- against the reference ---------------------------------------------------------------------


def _item(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    ranges = st.tuples(value, value).map(lambda pair: f"{min(pair)}-{max(pair)}")
    # cronsim reads a one-value range with a step ("3-3/2") as "3/2"; Vixie cron does not.
    wide = st.tuples(value, value).filter(lambda pair: pair[0] != pair[1]).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.just("*") | wide | value.map(str), st.integers(1, high).map(str)).map("/".join)
    return st.one_of(st.just("*"), value.map(str), ranges, stepped)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    return st.lists(_item(low, high), min_size=1, max_size=3).map(",".join)


EXPRESSIONS = st.tuples(_field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 7)).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(
    expression=EXPRESSIONS,
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1)),
)
def test_matches_agree_with_cronsim(expression, start):
    _, _, days, months, weekdays = expression.split()
    never = (
        weekdays.startswith("*")
        and not days.startswith("*")
        and not any(
            day <= {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}.get(month, 31)
            for day in _expand(days, 1, 31)
            for month in _expand(months, 1, 12)
        )
    )
    if never:
        # cronsim searches forever for these; we refuse them.
        with pytest.raises(ValueError):
            parse_cron(expression)
        return
    start = start.replace(second=0, microsecond=0)
    # CronSim yields matches strictly after its start.
    reference = list(islice(CronSim(expression, start), 5))
    assert walls(expression, start + timedelta(minutes=1), 5) == reference


def _expand(field: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for item in field.split(","):
        span, _, step = item.partition("/")
        first, _, last = span.partition("-")
        start = low if span == "*" else int(first)
        end = high if span == "*" else int(last) if last else high if step else start
        values |= set(range(start, end + 1, int(step or 1)))
    return values
