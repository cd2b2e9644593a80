"""Delivery windows: the document a queue, message or schedule carries, built in code or from the CLI's short form."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# What the short form looks like, for help texts.
WINDOW_HELP = "delivery window: '09:00-18:00 mon-fri Europe/Paris except=2026-12-25' or a JSON object"
_TIMES = re.compile(r"^(\d\d:\d\d)-(\d\d:\d\d)$")


def window(
    start: str,
    end: str,
    *,
    timezone: str | None = None,
    days: Iterable[str] | None = None,
    exclude_dates: Iterable[str] | None = None,
) -> dict[str, Any]:
    """`{"timezone", "days", "from", "to", "exclude_dates"}`: attempts start only from `start` to `end` (local
    HH:MM; `end` not later than `start` spans midnight) on `days`, never on `exclude_dates` (YYYY-MM-DD)."""
    doc: dict[str, Any] = {"from": start, "to": end}
    if timezone is not None:
        doc["timezone"] = timezone
    if days is not None:
        doc["days"] = list(days)
    if exclude_dates is not None:
        doc["exclude_dates"] = list(exclude_dates)
    return doc


def parse_window(text: str) -> dict[str, Any]:
    """A window from JSON, or the short form `09:00-18:00 [mon-fri|mon,wed] [Europe/Paris] [except=2026-12-25,...]`
    (words in any order); the server checks the values."""
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("a window is a JSON object")
        return doc
    times, zone, days, excluded = None, None, None, None
    for word in text.split():
        lowered = word.lower()
        if matched := _TIMES.match(word):
            times = matched.groups()
        elif lowered.startswith("except="):
            excluded = [day for day in word.split("=", 1)[1].split(",") if day]
        elif all(part in DAYS for part in re.split(r"[,-]", lowered)):
            days = _days(lowered)
        else:
            zone = word
    if times is None:
        raise ValueError("a window needs its hours, such as 09:00-18:00")
    return window(times[0], times[1], timezone=zone, days=days, exclude_dates=excluded)


def _days(text: str) -> list[str]:
    """`mon-fri`, `sat,sun` or `mon-wed,fri`: ranges wrap around the week (`fri-mon`)."""
    found: list[str] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not last:
            found.append(first)
            continue
        start, stop = DAYS.index(first), DAYS.index(last)
        found += [DAYS[(start + step) % 7] for step in range((stop - start) % 7 + 1)]
    return list(dict.fromkeys(found))
