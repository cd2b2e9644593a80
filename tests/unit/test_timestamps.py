"""RFC 3339 parsing/formatting and epoch-millisecond conversions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hourglass.core.timestamps import format_rfc3339, from_ms, parse_rfc3339, seconds_between, to_ms

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
        " 2026-11-21T10:00:00Z ",
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
