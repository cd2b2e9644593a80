"""Validation of every field of the REST contract; bad input raises ValidationError naming the field."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from hourglass.core import admission, aws_targets, json_body, wallclock
from hourglass.core import circuit_breaker as circuit
from hourglass.core import window as windows
from hourglass.core.cron import parse_cron
from hourglass.core.delivery_control import (
    CONTROL_FIELDS,
    DEFAULT_TIMEOUT,
    MAX_CONCURRENCY,
    MAX_RATE,
    MAX_TIMEOUT,
    MIN_CONCURRENCY,
    MIN_RATE,
    MIN_TIMEOUT,
)
from hourglass.core.limits import json_bytes
from hourglass.core.model import (
    DEFAULT_PRIORITY,
    JSON,
    ON_FAILURE,
    AwsTarget,
    CircuitBreaker,
    DeliveryControl,
    EventBridgeTarget,
    FlowControl,
    HttpTarget,
    LambdaTarget,
    NewMessage,
    NoticeStatus,
    Ordering,
    QueueSettings,
    RetryPolicy,
    SnsTarget,
    SqsTarget,
    Status,
    StepFunctionsTarget,
    Target,
    client_fields,
)
from hourglass.core.recurrence import MIN_EVERY, CatchUp, Recurrence, ScheduleRequest
from hourglass.core.timestamps import parse_rfc3339
from hourglass.core.urls import ascii_url
from hourglass.errors import ValidationError

QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
MAX_BODY_BYTES = 256 * 1024
MAX_REQUEST_BYTES = json_body.MAX_REQUEST_BYTES
MAX_BATCH = 100
MAX_HORIZON = 10 * 365 * 86400.0
MAX_TTL = MAX_HORIZON
MAX_ATTEMPTS = 100
MAX_LIST_LIMIT = 1000
MAX_DEDUP_ID = 128
MAX_URL = 2048
MAX_HEADERS = 32
MAX_HEADER_VALUE = 4096
# Set by Hourglass itself, or hop-by-hop (RFC 9110 7.6.1): they describe one connection, not the message.
RESERVED_HEADERS = frozenset(
    {"content-length", "host", "content-type", "expect"}
    | {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
    | {"proxy-authenticate", "proxy-authorization"}
)


@dataclass(frozen=True)
class MessagePatch:
    body: JSON = None
    has_body: bool = False
    delay: float | None = None
    deliver_at: datetime | None = None


@dataclass(frozen=True)
class ListQuery:
    status: Status | None
    limit: int
    cursor: str | None
    schedule: str | None = None
    notice: NoticeStatus | None = None
    flow_key: str | None = None
    order: ListOrder | None = None


class ListOrder(StrEnum):
    """A list's order (v1.2): by the time each message was scheduled for, or by creation; None: unspecified."""

    DUE = "due"
    CREATED = "created"


@dataclass(frozen=True)
class LaterTask:
    topic: str
    delay: float
    retry: int
    callback: str
    content: JSON


def decode_json(raw: bytes | str | None, *, limit: int = MAX_REQUEST_BYTES) -> JSON:
    """The request body as JSON (`core.json_body.decode`)."""
    return json_body.decode(raw, limit=limit)


def body(value: JSON, field: str) -> JSON:
    """A message body within the contract's 256 KiB (serialized); AWS's limits are admission's."""
    if json_bytes(value) > MAX_BODY_BYTES:
        raise ValidationError(field, f"is larger than {MAX_BODY_BYTES} bytes", code="too_large")
    return value


def queue_name(value: object) -> str:
    if not isinstance(value, str) or not QUEUE_NAME.fullmatch(value):
        raise ValidationError("queue", "must match ^[A-Za-z0-9_-]{1,64}$")
    return value


def _object(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(field, "must be a JSON object")
    return value


def _only(doc: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
    for key in doc:
        if key not in allowed:
            raise ValidationError(f"{prefix}{key}", "is not a known field")


def plain(value: float) -> str:
    """A bound as a person writes it: 31536000, not 3.1536e+07."""
    return str(int(value)) if float(value).is_integer() else f"{value}"


def number(value: object, field: str, *, low: float, high: float, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field, "must be a number")
    as_float = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(as_float) or not low <= as_float <= high:
        raise ValidationError(field, f"must be between {plain(low)} and {plain(high)}")
    return as_float


def integer(value: object, field: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(field, f"must be an integer between {low} and {high}")
    return value


def _string(value: object, field: str, *, max_len: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_len:
        raise ValidationError(field, f"must be a string of 1 to {max_len} characters")
    return value


def url(value: object, field: str) -> str:
    """An absolute http(s) URL, returned in the ASCII form it is sent in (IDNA host, percent-encoding)."""
    text = _string(value, field, max_len=MAX_URL)
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError as exc:
        raise ValidationError(field, "is not a valid URL") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValidationError(field, "must be an absolute http or https URL")
    if any(ch.isspace() or ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text):
        raise ValidationError(field, "must not contain whitespace or control characters")
    try:
        encoded = ascii_url(text)
    except ValueError as exc:
        raise ValidationError(field, "has a host name that cannot be IDNA-encoded") from exc
    if len(encoded) > MAX_URL:
        raise ValidationError(field, f"is longer than {MAX_URL} characters once percent-encoded")
    return encoded


def header_value(value: object, field: str) -> str:
    """A value HTTP/1.1 can carry: visible characters, spaces and tabs, Latin-1 at most; 4 KiB."""
    if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE:
        raise ValidationError(field, f"must be a single-line string of at most {MAX_HEADER_VALUE} characters")
    for char in value:
        if char in "\r\n":
            raise ValidationError(field, "must be a single-line string")
        if not (char == "\t" or " " <= char <= "~" or "\xa0" <= char <= "\xff"):
            raise ValidationError(field, f"contains {char!r}, which an HTTP header cannot carry (only Latin-1 text)")
    return value


def target(value: object, field: str = "target") -> Target:
    doc = _object(value, field)
    kind = doc.get("type")
    if kind == "http":
        _only(doc, frozenset({"type", "url", "headers"}), f"{field}.")
        headers = _object(doc.get("headers", {}), f"{field}.headers")
        if len(headers) > MAX_HEADERS:
            raise ValidationError(f"{field}.headers", f"at most {MAX_HEADERS} headers")
        for name, raw_value in headers.items():
            reserved = name.lower() in RESERVED_HEADERS or name.lower().startswith("hourglass-")
            if not HEADER_NAME.fullmatch(name) or reserved:
                raise ValidationError(f"{field}.headers.{name}", "is not an allowed header name")
            header_value(raw_value, f"{field}.headers.{name}")
        return HttpTarget(url=url(doc.get("url"), f"{field}.url"), headers=dict(headers))
    if kind == "sqs":
        _only(doc, frozenset({"type", "queue_url"}), f"{field}.")
        return SqsTarget(queue_url=url(doc.get("queue_url"), f"{field}.queue_url"))
    if isinstance(kind, str) and kind in aws_targets.KINDS:
        return _aws_target(aws_targets.KINDS[kind], doc, field)
    raise ValidationError(f"{field}.type", f"must be one of {TARGET_TYPES}")


TARGET_TYPES = '"http", "sqs", "lambda", "sns", "eventbridge" or "stepfunctions"'
# EventBridge's bounds of an entry's Source and DetailType; sources starting with `aws.` are AWS's own.
MAX_EVENT_SOURCE = 256
MAX_DETAIL_TYPE = 128


def _aws_target(kind: aws_targets.Kind, doc: Mapping[str, Any], field: str) -> AwsTarget:
    """A Lambda, SNS, EventBridge or Step Functions target: its ARN of the right shape (whether the stack
    allows it is `service.targets.check_allowed`'s), and an event's source and detail type."""
    extra = frozenset({"source", "detail_type"}) if kind.type == "eventbridge" else frozenset()
    _only(doc, frozenset({"type", kind.field}) | extra, f"{field}.")
    arn = _string(doc.get(kind.field), f"{field}.{kind.field}", max_len=2048)
    if not kind.arn.fullmatch(arn):
        shape = f"arn:aws:{kind.service}:<region>:<account>:{kind.resource}<name>"
        raise ValidationError(f"{field}.{kind.field}", f"must be the ARN of {kind.label} ({shape})")
    if kind.type == "lambda":
        return LambdaTarget(arn)
    if kind.type == "sns":
        return SnsTarget(arn)
    if kind.type == "stepfunctions":
        return StepFunctionsTarget(arn)
    defaults = EventBridgeTarget(arn)
    source = _string(doc.get("source", defaults.source), f"{field}.source", max_len=MAX_EVENT_SOURCE)
    if source.startswith("aws."):
        raise ValidationError(f"{field}.source", 'must not start with "aws." (AWS\'s own event sources)')
    detail_type = _string(doc.get("detail_type", defaults.detail_type), f"{field}.detail_type", max_len=MAX_DETAIL_TYPE)
    return EventBridgeTarget(arn, source=source, detail_type=detail_type)


def retry_policy(value: object) -> RetryPolicy:
    doc = _object(value, "retry")
    _only(doc, frozenset({"max_attempts", "backoff_base", "backoff_max"}), "retry.")
    default = RetryPolicy()
    base = number(doc.get("backoff_base", default.backoff_base), "retry.backoff_base", low=0, high=86400)
    ceiling = number(doc.get("backoff_max", default.backoff_max), "retry.backoff_max", low=0, high=30 * 86400)
    assert base is not None and ceiling is not None
    return RetryPolicy(
        max_attempts=integer(
            doc.get("max_attempts", default.max_attempts), "retry.max_attempts", low=1, high=MAX_ATTEMPTS
        ),
        backoff_base=base,
        backoff_max=ceiling,
    )


# The delivery control fields (v1.1) are read by `delivery_control` below.
QUEUE_FIELDS = (
    frozenset({"default_delay", "max_delay", "ttl", "target", "retry", "signing_secret", "signing_secret_next"})
    | CONTROL_FIELDS
)


HH_MM = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
WINDOW_FIELDS = frozenset({"timezone", "days", "from", "to", "exclude_dates"})


def window(value: object, field: str = "window") -> windows.Window | None:
    """A delivery window (`core.window`); null is none. Days default to every day, the zone to UTC."""
    if value is None:
        return None
    doc = _object(value, field)
    _only(doc, WINDOW_FIELDS, f"{field}.")
    raw_days = doc.get("days", list(windows.DAYS))
    if not isinstance(raw_days, list) or not 1 <= len(raw_days) <= len(windows.DAYS):
        raise ValidationError(f"{field}.days", "must be a list of 1 to 7 day names such as mon")
    for index, name in enumerate(raw_days):
        if name not in windows.DAYS:
            raise ValidationError(f"{field}.days[{index}]", f"must be one of {', '.join(windows.DAYS)}")
    times = {}
    for key in ("from", "to"):
        raw = doc.get(key)
        if not isinstance(raw, str) or not HH_MM.fullmatch(raw):
            raise ValidationError(f"{field}.{key}", "is required, a 24-hour local time HH:MM such as 09:00")
        times[key] = time.fromisoformat(raw)
    raw_dates = doc.get("exclude_dates", [])
    if not isinstance(raw_dates, list) or len(raw_dates) > windows.MAX_EXCLUDE_DATES:
        raise ValidationError(f"{field}.exclude_dates", f"must be a list of at most {windows.MAX_EXCLUDE_DATES} dates")
    excluded = set()
    for index, raw in enumerate(raw_dates):
        try:
            if not isinstance(raw, str) or not DATE.fullmatch(raw):
                raise ValueError(raw)
            excluded.add(date.fromisoformat(raw))
        except ValueError as exc:
            raise ValidationError(f"{field}.exclude_dates[{index}]", "must be a date such as 2026-12-25") from exc
    return windows.Window(
        timezone=timezone(doc.get("timezone", wallclock.DEFAULT_ZONE), f"{field}.timezone"),
        days=frozenset(windows.DAYS.index(name) for name in raw_days),
        start=times["from"],
        end=times["to"],
        exclude=frozenset(excluded),
    )


def queue_settings(doc: object, current: QueueSettings | None = None) -> QueueSettings:
    """The settings a PUT body gives; `current`: the queue's settings before it, whose secrets it may keep
    (`signing_secrets`)."""
    settings = _object({} if doc is None else doc, "body")
    _only(settings, QUEUE_FIELDS, "")
    defaults = QueueSettings()
    max_delay = number(settings.get("max_delay", defaults.max_delay), "max_delay", low=0, high=MAX_HORIZON)
    default_delay = number(settings.get("default_delay", 0), "default_delay", low=0, high=MAX_HORIZON)
    assert max_delay is not None and default_delay is not None
    if default_delay > max_delay:
        raise ValidationError("default_delay", "must not exceed max_delay")
    secret, next_secret = signing_secrets(settings, current)
    raw_target = settings.get("target")
    raw_retry = settings.get("retry")
    return QueueSettings(
        default_delay=default_delay,
        max_delay=max_delay,
        ttl=number(settings.get("ttl"), "ttl", low=0.001, high=MAX_TTL, allow_none=True),
        target=None if raw_target is None else target(raw_target),
        retry=defaults.retry if raw_retry is None else retry_policy(raw_retry),
        signing_secret=secret,
        signing_secret_next=next_secret,
    )


def signing_secrets(doc: Mapping[str, Any], current: QueueSettings | None) -> tuple[str | None, str | None]:
    """The secrets a PUT leaves, which are never returned, so a client cannot send back what it read:

    - a body naming neither keeps `current`'s (both);
    - one naming `signing_secret` sets the pair: the secret (null: none) and `signing_secret_next` as given
      (absent: none, so the PUT that promotes the next secret ends a rotation, as in the contract);
    - one naming only `signing_secret_next` keeps the current secret and sets the next (null: none).
    """
    kept = current or QueueSettings()
    if "signing_secret" not in doc and "signing_secret_next" not in doc:
        return kept.signing_secret, kept.signing_secret_next
    secret = _secret(doc, "signing_secret") if "signing_secret" in doc else kept.signing_secret
    next_secret = _secret(doc, "signing_secret_next")
    if next_secret is not None and secret is None:
        raise ValidationError("signing_secret_next", "needs signing_secret (the secret receivers verify today)")
    return secret, next_secret


def _secret(settings: Mapping[str, Any], name: str) -> str | None:
    value = settings.get(name)
    return None if value is None else _string(value, name, max_len=256)


def delivery_control(doc: Mapping[str, Any], *, paused: bool = False) -> DeliveryControl:
    """The control fields of a PUT body (other fields are left to `queue_settings`).

    `paused` is the queue's current state: PUT leaves it as it is. A boolean `paused` in the body is
    accepted and ignored (a client may send back what GET returned); anything else is a 400.
    """
    if "paused" in doc and not isinstance(doc["paused"], bool):
        raise ValidationError("paused", "must be a boolean (and is changed only by /pause and /resume)")
    rate = number(doc.get("rate_limit"), "rate_limit", low=MIN_RATE, high=MAX_RATE, allow_none=True)
    raw_concurrency = doc.get("max_concurrency")
    concurrency = (
        None
        if raw_concurrency is None
        else integer(raw_concurrency, "max_concurrency", low=MIN_CONCURRENCY, high=MAX_CONCURRENCY)
    )
    timeout = number(doc.get("timeout", DEFAULT_TIMEOUT), "timeout", low=MIN_TIMEOUT, high=MAX_TIMEOUT)
    assert timeout is not None
    raw_destination = doc.get("failure_destination")
    destination = None if raw_destination is None else target(raw_destination, "failure_destination")
    if destination is not None and not isinstance(destination, HttpTarget | SqsTarget | AwsTarget):
        raise ValidationError("failure_destination.type", f"must be one of {TARGET_TYPES}")
    raw_breaker = doc.get("circuit_breaker")
    breaker = None if raw_breaker is None else circuit_breaker(raw_breaker)
    raw_flow = doc.get("flow_control")
    flow = None if raw_flow is None else flow_control(raw_flow)
    raw_ordering = doc.get("ordering")
    return DeliveryControl(
        rate,
        concurrency,
        timeout,
        destination,
        paused,
        window(doc.get("window")),
        circuit_breaker=breaker,
        flow_control=flow,
        ordering=None if raw_ordering is None else ordering(raw_ordering),
    )


BREAKER_FIELDS = frozenset({"failure_ratio", "min_attempts", "window"})


def flow_control(doc: object) -> FlowControl | None:
    """`flow_control`: limits per flow key, in the ranges of the queue-wide ones; empty is none."""
    flow = _object(doc, "flow_control")
    _only(flow, frozenset({"key_rate_limit", "key_max_concurrency"}), "flow_control.")
    rate = number(
        flow.get("key_rate_limit"), "flow_control.key_rate_limit", low=MIN_RATE, high=MAX_RATE, allow_none=True
    )
    raw = flow.get("key_max_concurrency")
    field = "flow_control.key_max_concurrency"
    concurrency = None if raw is None else integer(raw, field, low=MIN_CONCURRENCY, high=MAX_CONCURRENCY)
    return None if rate is None and concurrency is None else FlowControl(rate, concurrency)


def ordering(doc: object) -> Ordering:
    """`ordering` (v1.3): by flow key, continuing or holding after a failure."""
    raw = _object(doc, "ordering")
    _only(raw, frozenset({"by", "on_failure"}), "ordering.")
    if raw.get("by") != "flow_key":
        raise ValidationError("ordering.by", 'is required and must be "flow_key"')
    on_failure = raw.get("on_failure", "continue")
    if on_failure not in ON_FAILURE:
        raise ValidationError("ordering.on_failure", 'must be "continue" or "hold"')
    return Ordering("flow_key", on_failure)


def circuit_breaker(value: object) -> CircuitBreaker:
    """`circuit_breaker`: each field optional (the contract's defaults), `paused_reason` is read-only."""
    doc = _object(value, "circuit_breaker")
    _only(doc, BREAKER_FIELDS, "circuit_breaker.")
    defaults = CircuitBreaker()
    field = "circuit_breaker."
    ratio = number(
        doc.get("failure_ratio", defaults.failure_ratio),
        field + "failure_ratio",
        low=circuit.MIN_RATIO,
        high=circuit.MAX_RATIO,
    )
    assert ratio is not None
    attempts = integer(
        doc.get("min_attempts", defaults.min_attempts),
        field + "min_attempts",
        low=circuit.MIN_ATTEMPTS,
        high=circuit.MAX_ATTEMPTS,
    )
    window = integer(
        doc.get("window", defaults.window), field + "window", low=circuit.MIN_WINDOW, high=circuit.MAX_WINDOW
    )
    return CircuitBreaker(ratio, attempts, window)


# `timezone` says how to read `deliver_at`, and is kept no further.
MESSAGE_FIELDS = client_fields(NewMessage) | {"timezone"}


def _carried(doc: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The `Carried` fields of a message or schedule document, each by its rule."""
    raw_target = doc.get("target")
    return {
        "target": None if raw_target is None else target(raw_target, f"{prefix}target"),
        "window": window(doc.get("window"), f"{prefix}window"),
        # Checked, with the field named, by admission (`admission.check_flow`), as on every other path.
        "flow_key": doc.get("flow_key"),
        "priority": doc.get("priority", DEFAULT_PRIORITY),
    }


def _deliver_at(value: object, field: str) -> datetime:
    try:
        return parse_rfc3339(value)  # type: ignore[arg-type]
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(field, "must be an RFC 3339 date-time with an offset") from exc


def timezone(value: object, field: str = "timezone") -> str:
    try:
        return wallclock.zone(value).key
    except ValueError as exc:
        raise ValidationError(field, str(exc)) from exc


def _local_deliver_at(value: object, zone_name: object, prefix: str) -> datetime:
    """A `deliver_at` without an offset, read as wall-clock time in the IANA `timezone`."""
    tz = wallclock.zone(timezone(zone_name, f"{prefix}timezone"))
    try:
        return wallclock.resolve(wallclock.parse_local(value), tz)
    except (ValueError, OverflowError) as exc:
        raise ValidationError(f"{prefix}deliver_at", str(exc)) from exc


def _check_horizon(
    field: str, delay: float | None, deliver_at: datetime | None, settings: QueueSettings, now: datetime
) -> None:
    effective = delay if delay is not None else (deliver_at - now).total_seconds() if deliver_at else None
    if effective is not None and effective > settings.max_delay:
        raise ValidationError(field, f"is beyond the queue's max_delay of {plain(settings.max_delay)} s")


def new_message(doc: object, index: int, settings: QueueSettings, now: datetime) -> NewMessage:
    prefix = f"messages[{index}]"
    message = _object(doc, prefix)
    _only(message, MESSAGE_FIELDS, f"{prefix}.")
    if "body" not in message:
        raise ValidationError(f"{prefix}.body", "is required")
    content = body(message["body"], f"{prefix}.body")
    if message.get("delay") is not None and message.get("deliver_at") is not None:
        raise ValidationError(f"{prefix}.delay", "delay and deliver_at are mutually exclusive")
    delay = number(message.get("delay"), f"{prefix}.delay", low=0, high=MAX_HORIZON, allow_none=True)
    deliver_at = None
    if message.get("timezone") is not None and message.get("deliver_at") is None:
        raise ValidationError(f"{prefix}.timezone", "is only allowed with deliver_at")
    if message.get("timezone") is not None:
        deliver_at = _local_deliver_at(message["deliver_at"], message["timezone"], f"{prefix}.")
    elif message.get("deliver_at") is not None:
        deliver_at = _deliver_at(message["deliver_at"], f"{prefix}.deliver_at")
    if deliver_at is not None and deliver_at > now + timedelta(seconds=MAX_HORIZON):
        raise ValidationError(f"{prefix}.deliver_at", "is more than 10 years ahead")
    field = f"{prefix}.{'deliver_at' if deliver_at else 'delay'}"
    _check_horizon(field, delay, deliver_at, settings, now)
    dedup_id = message.get("dedup_id")
    if dedup_id is not None:
        dedup_id = _string(dedup_id, f"{prefix}.dedup_id", max_len=MAX_DEDUP_ID)
    carried = _carried(message, f"{prefix}.")
    # AWS's size limits are admission's (core.admission.admit), checked on the whole message.
    return NewMessage(
        body=content,
        delay=delay,
        deliver_at=deliver_at,
        ttl=number(message.get("ttl"), f"{prefix}.ttl", low=0.001, high=MAX_TTL, allow_none=True),
        dedup_id=dedup_id,
        **carried,
    )


def message_batch(doc: object, settings: QueueSettings, now: datetime) -> list[NewMessage]:
    request = _object(doc, "body")
    _only(request, frozenset({"messages"}), "")
    messages = request.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_BATCH:
        raise ValidationError("messages", f"must be a list of 1 to {MAX_BATCH} messages")
    return [new_message(item, index, settings, now) for index, item in enumerate(messages)]


def message_patch(doc: object, settings: QueueSettings, now: datetime) -> MessagePatch:
    patch = _object(doc, "body")
    _only(patch, frozenset({"body", "delay", "deliver_at"}), "")
    if not patch:
        raise ValidationError("body", "give at least one of body, delay, deliver_at")
    if patch.get("delay") is not None and patch.get("deliver_at") is not None:
        raise ValidationError("delay", "delay and deliver_at are mutually exclusive")
    if "body" in patch:
        body(patch["body"], "body")
    delay = number(patch.get("delay"), "delay", low=0, high=MAX_HORIZON, allow_none=True)
    deliver_at = None if patch.get("deliver_at") is None else _deliver_at(patch["deliver_at"], "deliver_at")
    if deliver_at and deliver_at > now + timedelta(seconds=MAX_HORIZON):
        raise ValidationError("deliver_at", "is more than 10 years ahead")
    _check_horizon("deliver_at" if deliver_at else "delay", delay, deliver_at, settings, now)
    return MessagePatch(body=patch.get("body"), has_body="body" in patch, delay=delay, deliver_at=deliver_at)


def attempts_cursor(params: Mapping[str, str] | None) -> int | None:
    """`GET .../attempts?cursor=n`: the attempts before attempt n (a history too long for one response is read
    newest page first, each page in attempt order)."""
    params = params or {}
    _only(params, frozenset({"cursor"}), "")
    cursor = params.get("cursor") or None
    if cursor is None:
        return None
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 10) or int(cursor) < 1:
        raise ValidationError("cursor", "is not a valid cursor")
    return int(cursor)


def list_query(params: Mapping[str, str] | None) -> ListQuery:
    params = params or {}
    _only(params, frozenset({"status", "limit", "cursor", "schedule", "notice", "order", "flow_key"}), "")
    order = params.get("order")
    if order is not None and order not in {o.value for o in ListOrder}:
        raise ValidationError("order", f"must be one of {', '.join(o.value for o in ListOrder)}")
    status = params.get("status")
    if status is not None and status not in {s.value for s in Status}:
        raise ValidationError("status", f"must be one of {', '.join(s.value for s in Status)}")
    raw_limit = params.get("limit", "50")
    if not (raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 10) or not (
        1 <= int(raw_limit) <= MAX_LIST_LIMIT
    ):
        raise ValidationError("limit", f"must be an integer between 1 and {MAX_LIST_LIMIT}")
    cursor = params.get("cursor") or None
    if cursor is not None and len(cursor) > 2048:
        raise ValidationError("cursor", "is not a valid cursor")
    schedule = params.get("schedule")
    if schedule is not None and not QUEUE_NAME.fullmatch(schedule):
        raise ValidationError("schedule", "must match ^[A-Za-z0-9_-]{1,64}$")
    notice = params.get("notice")
    if notice is not None and notice not in {s.value for s in NoticeStatus}:
        raise ValidationError("notice", f"must be one of {', '.join(s.value for s in NoticeStatus)}")
    flow_key = params.get("flow_key")
    if flow_key is not None:
        admission.check_flow(flow_key, DEFAULT_PRIORITY)
    return ListQuery(
        status=Status(status) if status else None,
        limit=int(raw_limit),
        cursor=cursor,
        schedule=schedule,
        notice=NoticeStatus(notice) if notice else None,
        flow_key=flow_key,
        order=ListOrder(order) if order else None,
    )


def later_task(doc: object) -> LaterTask:
    task = _object(doc, "body")
    _only(task, frozenset({"topic", "delay", "retry", "callback", "content"}), "")
    delay = number(task.get("delay", 0), "delay", low=0, high=MAX_HORIZON)
    assert delay is not None
    return LaterTask(
        topic=_string(task.get("topic"), "topic", max_len=256),
        delay=delay,
        retry=integer(task.get("retry", 0), "retry", low=0, high=MAX_ATTEMPTS - 1),
        callback=url(task.get("callback"), "callback"),
        content=body(task.get("content"), "content"),
    )


def later_id(doc: object) -> str:
    task = _object(doc, "body")
    _only(task, frozenset({"id"}), "")
    return _string(task.get("id"), "id", max_len=64)


# The rule's fields, the body and what the occurrences carry.
SCHEDULE_FIELDS = frozenset(f.name for f in fields(Recurrence)) | client_fields(ScheduleRequest) - {"recurrence"}
# The most seconds a schedule's occurrences may be spread after their times (`jitter`).
MAX_SCHEDULE_JITTER_S = 3600


def schedule_name(value: object) -> str:
    if not isinstance(value, str) or not QUEUE_NAME.fullmatch(value):
        raise ValidationError("name", "must match ^[A-Za-z0-9_-]{1,64}$")
    return value


def _bound(value: object, field: str, now: datetime) -> datetime | None:
    if value is None:
        return None
    bound = _deliver_at(value, field)
    if bound > now + timedelta(seconds=MAX_HORIZON):
        raise ValidationError(field, "is more than 10 years ahead")
    return bound


def schedule_request(doc: object, now: datetime) -> ScheduleRequest:
    """The PUT schedule document: exactly one of cron or every, an IANA timezone, bounds, body, target."""
    schedule = _object(doc, "body")
    _only(schedule, SCHEDULE_FIELDS, "")
    raw_cron, raw_every = schedule.get("cron"), schedule.get("every")
    if (raw_cron is None) == (raw_every is None):
        raise ValidationError("cron", "give exactly one of cron or every")
    cron = None
    if raw_cron is not None:
        try:
            cron = parse_cron(raw_cron)
        except ValueError as exc:
            raise ValidationError("cron", str(exc)) from exc
    if isinstance(raw_every, float) and raw_every.is_integer():
        raw_every = int(raw_every)  # 3600.0 is a whole number of seconds, as JSON clients often send it
    every = None if raw_every is None else integer(raw_every, "every", low=MIN_EVERY, high=int(MAX_HORIZON))
    start_at = _bound(schedule.get("start_at"), "start_at", now)
    end_at = _bound(schedule.get("end_at"), "end_at", now)
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise ValidationError("end_at", "must be later than start_at")
    if "body" not in schedule:
        raise ValidationError("body", "is required")
    recurrence = Recurrence(
        cron=cron,
        every=every,
        timezone=timezone(schedule.get("timezone", wallclock.DEFAULT_ZONE)),
        start_at=start_at,
        end_at=end_at,
        catch_up=_catch_up(schedule.get("catch_up", CatchUp.SKIP.value)),
        jitter=integer(schedule.get("jitter", 0), "jitter", low=0, high=MAX_SCHEDULE_JITTER_S),
    )
    return ScheduleRequest(
        recurrence=recurrence,
        body=body(schedule["body"], "body"),
        **_carried(schedule, ""),
    )


def _catch_up(value: object) -> CatchUp:
    if not isinstance(value, str) or value not in {policy.value for policy in CatchUp}:
        raise ValidationError("catch_up", "must be one of skip, latest, all")
    return CatchUp(value)
