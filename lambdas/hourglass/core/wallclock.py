"""IANA time zones from the pinned `tzdata` package, and local wall-clock times resolved to UTC.

A local time that does not exist (clocks go forward) resolves to the same wall time plus the gap
(02:30 -> 03:30); one that happens twice (clocks go back) resolves to the first of the two.
"""

from __future__ import annotations

import functools
import importlib.resources
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

DEFAULT_ZONE = "UTC"


@functools.cache
def zone_names() -> frozenset[str]:
    """Every key the bundled tzdata knows, links such as US/Eastern included."""
    return frozenset(importlib.resources.files("tzdata").joinpath("zones").read_text("utf-8").split())


def zone(name: object) -> ZoneInfo:
    """The zone from the tzdata package, never the host's zone files; raises ValueError for unknown names.

    Read from the package so a Lambda runtime without (or with older) system zone data computes the
    same times as the tests.
    """
    if not isinstance(name, str) or name not in zone_names():
        raise ValueError("must be an IANA time zone name such as Europe/London")
    return _load(name)


@functools.cache
def _load(name: str) -> ZoneInfo:
    package, _, leaf = f"tzdata.zoneinfo.{name}".replace("/", ".").rpartition(".")
    with importlib.resources.files(package).joinpath(leaf).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


def resolve(wall: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of a naive local wall time under the daylight-saving rules above."""
    # PEP 495: fold=0 takes the offset in force before a transition, which maps a time in the gap
    # to wall + gap and a repeated time to its first occurrence.
    return wall.replace(tzinfo=tz, fold=0).astimezone(UTC)


def wall_time(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall time at an instant."""
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def parse_local(text: object) -> datetime:
    """A local date-time without an offset ("2026-12-24T09:00:00"); raises ValueError otherwise."""
    shape = "must be a local date-time such as 2026-12-24T09:00:00"
    if not isinstance(text, str) or len(text) > 64 or "T" not in text.upper():
        raise ValueError(shape)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(shape) from exc
    if value.tzinfo is not None:
        raise ValueError("must not have a UTC offset when timezone is given")
    return value
