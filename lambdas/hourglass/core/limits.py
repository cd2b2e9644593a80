"""AWS's size limits applied to what Hourglass accepts: a stored message item under DynamoDB's 400 KB,
an SQS delivery envelope under SQS's 256 KiB, a list page under Lambda's 6 MB response (in UTF-8 bytes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hourglass.core.model import HttpTarget, SqsTarget, Target
from hourglass.errors import ValidationError

DYNAMODB_ITEM_BYTES = 400 * 1024
# Room for everything the estimate leaves out: a safety margin, not a budget anything may use.
ITEM_MARGIN = 16 * 1024
MAX_ITEM_BYTES = DYNAMODB_ITEM_BYTES - ITEM_MARGIN
SQS_MESSAGE_BYTES = 256 * 1024
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# A list page leaves this much of Lambda's 6 MB to the envelope and API Gateway's own headers.
MAX_PAGE_BYTES = LAMBDA_RESPONSE_BYTES - 64 * 1024

# Upper bounds of the message item's attributes other than body, target, dedup id and topic
# (adapters/items.py: keys, ids, status, times, counters, retry policy, sweep keys, expiry, and a
# last_error of up to 1,000 characters of 4 UTF-8 bytes): measured at about 1 KiB, bounded at 6 KiB.
FIXED_ITEM_BYTES = 6 * 1024
# The SQS envelope around a body: {"id":..,"queue":..,"body":..,"due_at":..,"attempt":n} with an id
# of 64 characters, a queue name of 64, a 24-character time and a 10-digit attempt.
ENVELOPE_OVERHEAD = len('{"id":"","queue":"","body":,"due_at":"","attempt":}') + 64 + 64 + 24 + 10


def json_bytes(value: Any) -> int:
    """Size of `value` as Hourglass stores and sends it: compact JSON, UTF-8, no ASCII escaping."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def text_bytes(value: str | None) -> int:
    return 0 if value is None else len(value.encode("utf-8", "surrogatepass"))


def message_item_bytes(
    body: Any, target: Target | None, *, dedup_id: str | None = None, topic: str | None = None
) -> int:
    """An upper bound of the DynamoDB item size of a message with these fields (names + values, bytes)."""
    target_bytes = 0 if target is None else len("target") + json_bytes(asdict(target))
    dedup_bytes = 0 if dedup_id is None else len("dedup_id") + text_bytes(dedup_id)
    topic_bytes = 0 if topic is None else len("topic") + text_bytes(topic)
    return len("body") + json_bytes(body) + target_bytes + dedup_bytes + topic_bytes + FIXED_ITEM_BYTES


def sqs_envelope_bytes(body: Any) -> int:
    """An upper bound of the size of the SQS message that delivers `body` (core.delivery.sqs_envelope)."""
    return json_bytes(body) + ENVELOPE_OVERHEAD


def check_message(
    body: Any,
    target: Target | None,
    *,
    queue_target: Target | None = None,
    dedup_id: str | None = None,
    body_field: str = "body",
    target_field: str = "target",
) -> None:
    """Refuses (413) a message whose stored item or SQS envelope would exceed AWS's limits."""
    size = message_item_bytes(body, target, dedup_id=dedup_id)
    if size > MAX_ITEM_BYTES:
        headers = target.headers if isinstance(target, HttpTarget) else {}
        header_bytes = json_bytes(headers)
        field = f"{target_field}.headers" if header_bytes > json_bytes(body) else body_field
        raise ValidationError(
            field,
            f"makes the stored message {size} bytes (UTF-8); body and target together must stay under "
            f"{MAX_ITEM_BYTES} bytes",
            code="too_large",
        )
    if isinstance(target or queue_target, SqsTarget) and sqs_envelope_bytes(body) > SQS_MESSAGE_BYTES:
        raise ValidationError(
            body_field,
            f"is too large for an SQS target: the delivered message would exceed {SQS_MESSAGE_BYTES} bytes "
            f"(the body may be at most {SQS_MESSAGE_BYTES - ENVELOPE_OVERHEAD} bytes)",
            code="too_large",
        )


def page_length(documents: Sequence[Any], budget: int = MAX_PAGE_BYTES) -> int:
    """How many of `documents`, from the first, fit in `budget` bytes of a JSON list; at least one."""
    used = 2
    for count, doc in enumerate(documents):
        used += json_bytes(doc) + (1 if count else 0)
        if used > budget and count:
            return count
    return len(documents)
