"""What a delivery sends and how its answer is judged (HTTP, SQS, `later` callbacks and the AWS service targets)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from hourglass.core import json_body, signing
from hourglass.core.model import Message
from hourglass.core.timestamps import format_rfc3339, seconds_between
from hourglass.errors import DeliveryError

RETRYABLE_STATUSES = frozenset({408, 425, 429})
# Errors of AWS service targets (Lambda, SNS, EventBridge, Step Functions) that a later attempt may pass although
# AWS answers them with a 4xx status, or gives them no status at all (a PutEvents entry's error): throttling,
# limits of running work, a function being updated. Every other 4xx (access denied, not found, validation) is final.
TRANSIENT_SERVICE_CODES = frozenset(
    {
        "TooManyRequestsException",
        "Throttled",
        "ThrottlingException",
        "KMSThrottlingException",
        "KMSThrottling",
        "RequestLimitExceeded",
        "ExecutionLimitExceeded",
        "ResourceConflictException",
        "ResourceNotReadyException",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
    }
)
# An attempt's error as `last_error` and the attempt history keep it: at most this many characters.
MAX_ERROR = 500
# The target's response body as the attempt history keeps it: its first KiB, at most this many UTF-8 bytes.
MAX_RESPONSE = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A response keeps its line breaks and tabs (it is read as text); other control characters are escaped.
_RESPONSE_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def error_text(text: str) -> str:
    """`text` (part of it may come from the target's reply) as it is stored and shown: control
    characters and lone surrogates written as escapes, at most MAX_ERROR characters."""
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.strip())
    return escaped.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_ERROR]


def response_text(data: bytes | str | None) -> str | None:
    """The first KiB of a target's reply as stored and shown: bytes that are not UTF-8 replaced, control
    characters other than line breaks and tabs escaped, at most MAX_RESPONSE UTF-8 bytes (None when empty)."""
    if not data:
        return None
    text = data if isinstance(data, str) else data[:MAX_RESPONSE].decode("utf-8", "replace")
    escaped = _RESPONSE_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    encoded = escaped.encode("utf-8", "backslashreplace")[:MAX_RESPONSE]
    return encoded.decode("utf-8", "ignore")


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    retryable: bool = False
    error: str | None = None
    retry_after: float | None = None
    # The HTTP status the target answered (None for SQS and transport failures), for the attempt history.
    status_code: int | None = None
    # The first KiB of the target's response body (HTTP targets), for the attempt history.
    response: str | None = None

    def __post_init__(self) -> None:
        # Every attempt's error is built into an Outcome, whatever path built it: one place makes it safe.
        if self.error is not None:
            object.__setattr__(self, "error", error_text(self.error))
        if self.response is not None:
            object.__setattr__(self, "response", response_text(self.response))


DELIVERED = Outcome(delivered=True)


def compact(value: Any) -> bytes:
    return json_body.encode(value).encode()


def http_request(
    message: Message, attempt: int, *, headers: dict[str, str], secrets: tuple[str, ...], now: datetime
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an HTTP attempt; signed with each of `secrets` (none: unsigned)."""
    body = compact(message.body)
    out = {
        **headers,
        "Content-Type": "application/json",
        "Hourglass-Message-Id": message.id,
        "Hourglass-Queue": message.queue,
        "Hourglass-Attempt": str(attempt),
        "Hourglass-Due-At": format_rfc3339(message.due_at),
    }
    if message.schedule:
        out["Hourglass-Schedule"] = message.schedule
    if secrets:
        out["Hourglass-Signature"] = signing.header(secrets, body, int(now.timestamp()))
    return body, out


def later_request(message: Message) -> bytes:
    return compact({"id": message.id, "topic": message.topic, "content": message.body})


def sqs_envelope(message: Message, attempt: int) -> str:
    envelope = {
        "id": message.id,
        "queue": message.queue,
        "body": message.body,
        "due_at": format_rfc3339(message.due_at),
        "attempt": attempt,
    }
    if message.schedule:
        envelope["schedule"] = message.schedule
    return compact(envelope).decode()


def retry_after_seconds(header: str | None, now: datetime) -> float | None:
    if not header:
        return None
    text = header.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, seconds_between(now, when))


def judge_http(status: int, retry_after: str | None, now: datetime, body: bytes = b"") -> Outcome:
    response = response_text(body)
    if 200 <= status < 300:
        return Outcome(delivered=True, status_code=status, response=response)
    error = f"HTTP {status}"
    if status in RETRYABLE_STATUSES or status >= 500:
        wait = retry_after_seconds(retry_after, now)
        return Outcome(False, retryable=True, error=error, retry_after=wait, status_code=status, response=response)
    return Outcome(False, retryable=False, error=error, status_code=status, response=response)


def judge_later(status: int, body: bytes) -> Outcome:
    """`later` callbacks succeed only with a JSON reply whose code is 100; all else is retried."""
    try:
        code = json.loads(body.decode()).get("code")
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        code = None
    response = response_text(body)
    if code == 100:
        return Outcome(delivered=True, status_code=status, response=response)
    return Outcome(False, retryable=True, error=f"HTTP {status}, code {code!r}", status_code=status, response=response)


def transport_failure(reason: str) -> Outcome:
    return Outcome(False, retryable=True, error=reason)


def service_refusal(service: str, code: str, status: int | None, reason: str) -> DeliveryError:
    """An AWS service target's refusal, judged: throttling and 5xx are retried with the queue's policy; access
    denied, not found and validation errors end the message `failed`, with the service's reason."""
    retryable = (status is not None and (status >= 500 or status in RETRYABLE_STATUSES)) or (
        code in TRANSIENT_SERVICE_CODES or "Throttl" in code
    )
    return DeliveryError(f"{service} {code}: {reason}", retryable=retryable)
