"""RFC 3339 timestamps and epoch-millisecond conversions, always aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 time with an offset; raises ValueError otherwise."""
    if not isinstance(text, str) or len(text) > 64 or "T" not in text.upper():
        raise ValueError("not an RFC 3339 date-time")
    value = datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("has no UTC offset")
    return value.astimezone(UTC)


def format_rfc3339(value: datetime) -> str:
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def to_ms(value: datetime) -> int:
    return (value - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int | float) -> datetime:
    return EPOCH + timedelta(milliseconds=int(ms))


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()
