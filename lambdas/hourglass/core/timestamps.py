"""RFC 3339 timestamps and epoch-millisecond conversions, always aware UTC."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# RFC 3339 section 5.6 `date-time`, nothing else: no week or ordinal dates, no basic format, no
# seconds in the offset, no padding. At most 9 fraction digits (nanoseconds) keeps the text short.
RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 date-time with an offset; raises ValueError otherwise.

    A fraction finer than a microsecond is rounded up, so a parsed time is never before the one written.
    """
    match = RFC3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("not an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))")
    year, month, day, hour, minute, second, fraction, _zulu, sign, off_h, off_m = match.groups()
    if int(off_h or 0) > 23 or int(off_m or 0) > 59:
        raise ValueError("has an offset out of range")
    offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0)) * (-1 if sign == "-" else 1)
    digits = (fraction or "").ljust(9, "0")
    nanos = int(digits)
    value = datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=timezone(offset)
    ) + timedelta(microseconds=-(-nanos // 1000))
    return value.astimezone(UTC)


def ceil_ms(value: datetime) -> datetime:
    """`value` rounded up to a whole millisecond: stored times are milliseconds and must never be early."""
    rest = value.microsecond % 1000
    return value if rest == 0 else value + timedelta(microseconds=1000 - rest)


def format_rfc3339(value: datetime) -> str:
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def to_ms(value: datetime) -> int:
    return (value - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int | float) -> datetime:
    return EPOCH + timedelta(milliseconds=int(ms))


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()
