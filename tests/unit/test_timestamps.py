"""RFC 3339 parsing/formatting and epoch-millisecond conversions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hourglass.core.timestamps import ceil_ms, format_rfc3339, from_ms, parse_rfc3339, seconds_between, to_ms

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_format_has_milliseconds_and_z():
    assert format_rfc3339(NOW) == "2026-11-21T10:00:00.000Z"


def test_format_truncates_to_milliseconds():
    assert format_rfc3339(NOW + timedelta(microseconds=999999)) == "2026-11-21T10:00:00.999Z"


def test_format_converts_offsets_to_utc():
    assert format_rfc3339(datetime(2026, 11, 21, 5, 30, tzinfo=timezone(timedelta(hours=-4, minutes=-30)))) == (
        "2026-11-21T10:00:00.000Z"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-21T10:00:00Z",
        "2026-11-21T10:00:00z",
        "2026-11-21T10:00:00.000Z",
        "2026-11-21T11:00:00+01:00",
        "2026-11-21T05:00:00-05:00",
    ],
)
def test_parse_accepts_offsets(text):
    assert parse_rfc3339(text) == NOW


def test_parse_returns_utc():
    assert parse_rfc3339("2026-11-21T11:00:00+01:00").utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text", ["2026-11-21T10:00:00", "2026-11-21", "", "yesterday", "2026-13-01T00:00:00Z", "x" * 65, None, 5]
)
def test_parse_rejects_bad_input(text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_ms_round_trip():
    assert from_ms(to_ms(NOW)) == NOW


def test_to_ms_value():
    assert to_ms(NOW) == 1795255200000


def test_to_ms_floors_sub_millisecond():
    assert to_ms(NOW + timedelta(microseconds=1999)) == 1795255200001


def test_from_ms_is_aware_utc():
    assert from_ms(0) == datetime(1970, 1, 1, tzinfo=UTC)


def test_seconds_between():
    assert seconds_between(NOW, NOW + timedelta(milliseconds=1500)) == 1.5


@pytest.mark.parametrize(
    "text",
    [
        " 2026-11-21T10:00:00Z ",
        "2026-11-21T10:00:00Z\n",
        "2026-W47-6T10:00:00Z",
        "2026-325T10:00:00Z",
        "20261121T100000Z",
        "2026-11-21T100000Z",
        "2026-11-21T10:00:00+01:00:30",
        "2026-11-21T10:00:00+0100",
        "2026-11-21T10:00Z",
        "2026-11-21 10:00:00Z",
        "2026-11-21T10:00:00.Z",
        "2026-11-21T10:00:00.1234567890Z",
        "+2026-11-21T10:00:00Z",
        "\uff12\uff10\uff12\uff16-11-21T10:00:00Z",  # full-width digits
        "2026-11-21T10:00:00+24:00",
        "2026-11-21T24:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-11-21T10:00:60Z",
    ],
)
def test_parse_refuses_what_rfc_3339_does_not_define(text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_parse_rounds_sub_microsecond_fractions_up():
    assert parse_rfc3339("2026-11-21T10:00:00.000000001Z") == NOW + timedelta(microseconds=1)


def test_parse_keeps_nanosecond_fractions_that_are_whole_microseconds():
    assert parse_rfc3339("2026-11-21T10:00:00.123456000Z") == NOW + timedelta(microseconds=123456)


def test_ceil_ms_rounds_sub_millisecond_times_up():
    assert ceil_ms(NOW + timedelta(microseconds=1)) == NOW + timedelta(milliseconds=1)
    assert ceil_ms(NOW + timedelta(microseconds=1999)) == NOW + timedelta(milliseconds=2)


def test_ceil_ms_keeps_whole_milliseconds():
    assert ceil_ms(NOW + timedelta(milliseconds=7)) == NOW + timedelta(milliseconds=7)
