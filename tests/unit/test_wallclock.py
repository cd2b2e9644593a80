"""Time zones from the tzdata package and local wall times resolved under the daylight-saving rules."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import pytest
from hourglass.core import wallclock


def test_zones_load_from_the_tzdata_package_without_host_zone_files():
    wallclock._load.cache_clear()
    saved = zoneinfo.TZPATH
    zoneinfo.reset_tzpath(to=[])
    try:
        tz = wallclock.zone("Europe/Paris")
    finally:
        zoneinfo.reset_tzpath(to=saved)
        wallclock._load.cache_clear()
    assert datetime(2026, 7, 1, 12, tzinfo=tz).utcoffset().total_seconds() == 7200


@pytest.mark.parametrize("name", ["UTC", "Europe/London", "US/Eastern", "America/Argentina/Buenos_Aires"])
def test_known_names_keep_their_key(name):
    assert wallclock.zone(name).key == name


@pytest.mark.parametrize(
    "name", ["", "Mars/Olympus", "europe/london", "../../etc/passwd", "Europe/", "/Europe/London", None, 5, ["UTC"]]
)
def test_unknown_names_are_rejected(name):
    with pytest.raises(ValueError):
        wallclock.zone(name)


NEW_YORK = wallclock.zone("America/New_York")


def test_a_time_in_the_spring_gap_resolves_to_wall_time_plus_the_gap():
    assert wallclock.resolve(datetime(2026, 3, 8, 2, 30), NEW_YORK) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)


def test_a_time_in_the_repeated_hour_resolves_to_its_first_pass():
    assert wallclock.resolve(datetime(2026, 11, 1, 1, 30), NEW_YORK) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_wall_time_reads_the_clock_at_an_instant():
    assert wallclock.wall_time(datetime(2026, 11, 1, 6, 30, tzinfo=UTC), NEW_YORK) == datetime(2026, 11, 1, 1, 30)


def test_parse_local_reads_a_time_without_offset():
    assert wallclock.parse_local("2026-12-24T09:00:00") == datetime(2026, 12, 24, 9)


@pytest.mark.parametrize(
    "text", ["2026-12-24T09:00:00Z", "2026-12-24T09:00:00+01:00", "2026-12-24", "tomorrow", "2026-13-01T00:00", None, 5]
)
def test_parse_local_rejects_offsets_and_garbage(text):
    with pytest.raises(ValueError):
        wallclock.parse_local(text)
