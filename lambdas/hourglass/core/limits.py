"""AWS's size limits applied to what Hourglass accepts, measured as AWS measures them: a stored message item
under DynamoDB's 400 KB, an SQS message under SQS's 256 KiB, a list page under Lambda's 6 MB response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from hourglass.core import delivery
from hourglass.core.model import HttpTarget, Message, SqsTarget, Target
from hourglass.errors import ValidationError

DYNAMODB_ITEM_BYTES = 400 * 1024
# Room for everything the estimate leaves out: a safety margin, not a budget anything may use.
ITEM_MARGIN = 16 * 1024
MAX_ITEM_BYTES = DYNAMODB_ITEM_BYTES - ITEM_MARGIN
SQS_MESSAGE_BYTES = 256 * 1024
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# A list page leaves this much of Lambda's 6 MB to the envelope and API Gateway's own headers.
MAX_PAGE_BYTES = LAMBDA_RESPONSE_BYTES - 64 * 1024

# Upper bounds of the message item's attributes other than body, target, dedup id, topic and schedule
# (adapters/items.py: keys, ids, status, times, counters, retry policy, sweep keys, expiry, a last_error
# of up to 500 characters of 4 UTF-8 bytes and a final attempt record whose error of 500 characters may
# be escaped to 6 bytes each and whose response body of 1 KiB (`delivery.MAX_RESPONSE`) to 2 bytes each):
# 7,806 bytes at their largest (tests/unit/test_limits.py), bounded at 8 KiB.
FIXED_ITEM_BYTES = 8 * 1024
# The SQS envelope around a body: {"id":..,"queue":..,"body":..,"due_at":..,"attempt":n} with an id
# of 64 characters, a queue name of 64, a 24-character time and a 10-digit attempt: the largest frame
# of a message that is no schedule occurrence (an occurrence's also names its schedule).
ENVELOPE_OVERHEAD = len('{"id":"","queue":"","body":,"due_at":"","attempt":}') + 64 + 64 + 24 + 10
# The attempt number an envelope is measured with: 10 digits (redeliveries keep counting attempts).
ATTEMPT_BOUND = 10**10 - 1


def json_bytes(value: Any) -> int:
    """Size of `value` as Hourglass stores and sends it: compact JSON, UTF-8, no ASCII escaping."""
    return len(delivery.compact(value))


def text_bytes(value: str | None) -> int:
    return 0 if value is None else len(value.encode("utf-8", "surrogatepass"))


def sqs_message_bytes(text: str) -> int:
    """What SQS counts against its size limit: the body in UTF-8 plus the message attributes' names, types
    and values. Hourglass sends no attributes (adapters/sqs_target.py), so the body is all of it."""
    return text_bytes(text)


def payload_limit(place: Target | None) -> int | None:
    """The payload limit AWS sets on a place a message's content is sent to: an SQS queue's message size;
    None for HTTP callbacks (no AWS service carries them)."""
    return SQS_MESSAGE_BYTES if isinstance(place, SqsTarget) else None


def with_body(frame: str, body_bytes: int) -> int:
    """SQS's size of a JSON text built with a null body, once the body of `body_bytes` takes its place."""
    return sqs_message_bytes(frame) - len("null") + body_bytes


def message_item_bytes(message: Message, body_bytes: int | None = None) -> int:
    """An upper bound of the DynamoDB item size of `message` with its body inline: attribute names and
    values, in bytes, as DynamoDB counts them (the item is never larger with the body kept elsewhere)."""
    body = json_bytes(message.body) if body_bytes is None else body_bytes
    target = message.target
    target_bytes = 0 if target is None else len("target") + json_bytes(asdict(target))
    named = {"dedup_id": message.dedup_id, "topic": message.topic, "schedule": message.schedule}
    text = sum(len(name) + text_bytes(value) for name, value in named.items() if value is not None)
    return len("body") + body + target_bytes + text + FIXED_ITEM_BYTES


def sqs_envelope_bytes(message: Message, body_bytes: int | None = None) -> int:
    """SQS's size of the envelope that delivers `message` (core.delivery.sqs_envelope), at the largest attempt."""
    body = json_bytes(message.body) if body_bytes is None else body_bytes
    return with_body(delivery.sqs_envelope(replace(message, body=None), ATTEMPT_BOUND), body)


def check_message(
    message: Message,
    *,
    queue_target: Target | None = None,
    body_field: str = "body",
    target_field: str = "target",
) -> None:
    """Refuses (413) a message version whose stored item or SQS envelope would exceed AWS's limits."""
    body_bytes = json_bytes(message.body)
    size = message_item_bytes(message, body_bytes)
    target = message.target
    if size > MAX_ITEM_BYTES:
        headers = target.headers if isinstance(target, HttpTarget) else {}
        field = f"{target_field}.headers" if json_bytes(headers) > body_bytes else body_field
        raise ValidationError(
            field,
            f"makes the stored message {size} bytes (UTF-8); body and target together must stay under "
            f"{MAX_ITEM_BYTES} bytes",
            code="too_large",
        )
    limit = payload_limit(target or queue_target)
    envelope = sqs_envelope_bytes(message, body_bytes)
    if limit is not None and envelope > limit:
        raise ValidationError(
            body_field,
            f"is too large for an SQS target: the delivered message would be {envelope} bytes, over {limit} "
            f"(the body may be at most {limit - (envelope - body_bytes)} bytes here)",
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
