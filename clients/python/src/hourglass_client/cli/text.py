"""How the CLI shows values in a table cell: times, long bodies, targets, windows, limits and ordering."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# The field of each target type that says where it delivers.
TARGET_FIELDS = ("url", "queue_url", "function_arn", "topic_arn", "event_bus_arn", "state_machine_arn")


def time_text(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def target_text(target: Mapping[str, Any] | None) -> str:
    """`TYPE:WHERE`: an HTTP target's URL whole; an SQS queue, function, topic, bus or state machine by its name
    (`sqs:orders`), which is the last part of its URL or ARN."""
    if not target:
        return ""
    kind = str(target.get("type", "?"))
    where = next((str(target[f]) for f in TARGET_FIELDS if target.get(f)), "")
    if kind != "http":
        where = where.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return f"{kind}:{where}"


def window_text(window: Mapping[str, Any] | None) -> str:
    """`09:00-18:00 mon,tue Europe/Paris` (days left out when every day; `+N excluded` dates)."""
    if not window:
        return ""
    days = window.get("days") or []
    parts = [f"{window.get('from', '')}-{window.get('to', '')}"]
    if days and len(days) < 7:
        parts.append(",".join(days))
    parts.append(str(window.get("timezone") or "UTC"))
    excluded = window.get("exclude_dates") or []
    if excluded:
        parts.append(f"+{len(excluded)} excluded")
    return " ".join(parts)


def number(value: Any, unit: str = "") -> str:
    """A number as short as it reads (`10`, not `10.0`) with its unit; "" for None."""
    if value is None:
        return ""
    return f"{value:g}{unit}" if isinstance(value, int | float) else f"{value}{unit}"


def limits_text(rate: Any, concurrency: Any) -> str:
    """`20/s, 5 at once`: a rate and a concurrency limit, each left out when unlimited."""
    parts = [number(rate, "/s"), number(concurrency, " at once")]
    return ", ".join(p for p in parts if p)


def ordering_text(ordering: Mapping[str, Any] | None) -> str:
    """`in due order` (a queue's `ordering`), with `, held on failure` when a failure holds the key; "" for none."""
    if not ordering:
        return ""
    held = ", held on failure" if ordering.get("on_failure") == "hold" else ""
    return f"in due order{held}"
