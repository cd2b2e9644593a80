"""The SDK's delivery-window documents and the CLI's short form (no runtime needed)."""

from __future__ import annotations

import pytest
from hourglass_client import parse_window, window


def test_the_short_form_reads_hours_days_zone_and_exclusions() -> None:
    assert parse_window("09:00-18:00 mon-fri Europe/Paris except=2026-12-25,2027-01-01") == {
        "from": "09:00",
        "to": "18:00",
        "timezone": "Europe/Paris",
        "days": ["mon", "tue", "wed", "thu", "fri"],
        "exclude_dates": ["2026-12-25", "2027-01-01"],
    }


def test_day_ranges_wrap_around_the_week() -> None:
    assert parse_window("22:00-06:00 fri-mon")["days"] == ["fri", "sat", "sun", "mon"]


def test_json_is_taken_as_it_is() -> None:
    assert parse_window('{"from": "09:00", "to": "10:00"}') == window("09:00", "10:00")


def test_hours_are_required() -> None:
    with pytest.raises(ValueError, match="hours"):
        parse_window("mon-fri Europe/Paris")
