"""AWS's size limits applied to what Hourglass accepts, measured as AWS measures them: a stored message item
under DynamoDB's 400 KB, what a target service receives under its payload limit (SQS, SNS, Lambda's asynchronous
invoke, an EventBridge entry, a Step Functions input; docs/guarantees.md cites them), a response under Lambda's
6 MB as the serialized proxy response, the body escaped as a JSON string inside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from hourglass.core import delivery, json_body
from hourglass.core.model import (
    EventBridgeTarget,
    HttpTarget,
    LambdaTarget,
    Message,
    SnsTarget,
    SqsTarget,
    StepFunctionsTarget,
    Target,
)
from hourglass.errors import ValidationError

DYNAMODB_ITEM_BYTES = 400 * 1024
# Room for everything the estimate leaves out: a safety margin, not a budget anything may use.
ITEM_MARGIN = 16 * 1024
MAX_ITEM_BYTES = DYNAMODB_ITEM_BYTES - ITEM_MARGIN
SQS_MESSAGE_BYTES = 256 * 1024
# The payload limits of the AWS service targets (docs/guarantees.md, "Payload limits", cites AWS's pages).
SNS_MESSAGE_BYTES = 256 * 1024
LAMBDA_ASYNC_PAYLOAD_BYTES = 1024 * 1024
# An EventBridge entry (Source, DetailType and Detail in UTF-8) must be *less than* 256 KB.
EVENTBRIDGE_ENTRY_BYTES = 256 * 1024 - 1
STEPFUNCTIONS_INPUT_BYTES = 256 * 1024
PAYLOAD_LIMITS: dict[type, tuple[int, str]] = {
    SqsTarget: (SQS_MESSAGE_BYTES, "an SQS target"),
    SnsTarget: (SNS_MESSAGE_BYTES, "an SNS target"),
    LambdaTarget: (LAMBDA_ASYNC_PAYLOAD_BYTES, "a Lambda target (asynchronous invoke)"),
    EventBridgeTarget: (EVENTBRIDGE_ENTRY_BYTES, "an EventBridge target (one PutEvents entry)"),
    StepFunctionsTarget: (STEPFUNCTIONS_INPUT_BYTES, "a Step Functions target (execution input)"),
}
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# A list page leaves this much of Lambda's 6 MB to the rest of the proxy response: status, headers, the
# document around the list (its cursor), each measured as the proxy carries it.
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
    """The payload limit AWS sets on a place a message's content is sent to (an SQS queue's message size, an
    SNS message's, ...); None for HTTP callbacks (no AWS service carries them)."""
    limit = PAYLOAD_LIMITS.get(type(place))
    return None if limit is None else limit[0]


def payload_bytes(place: Target | None, text: str) -> int:
    """What the service of `place` counts against its limit when `text` is sent there: the text in UTF-8, and
    for an EventBridge entry its Source and DetailType too (Hourglass sets no Time or Resources)."""
    if isinstance(place, EventBridgeTarget):
        return text_bytes(place.source) + text_bytes(place.detail_type) + text_bytes(text)
    return sqs_message_bytes(text)


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
    place = target or queue_target
    limit = payload_limit(place)
    if limit is None:
        return
    # Every target service receives the SQS envelope (an EventBridge entry adds its source and detail type).
    envelope = payload_bytes(place, "") + sqs_envelope_bytes(message, body_bytes)
    if envelope > limit:
        raise ValidationError(
            body_field,
            f"is too large for {PAYLOAD_LIMITS[type(place)][1]}: the delivered message would be {envelope} bytes, "
            f"over {limit} (the body may be at most {limit - (envelope - body_bytes)} bytes here)",
            code="too_large",
        )


def proxy_response_bytes(response: Mapping[str, Any]) -> int:
    """What Lambda counts against its 6 MB for a proxy response: the object serialized as JSON, its body a
    JSON string within it. Python runtimes serialize with `json.dumps`, with ASCII escaping before 3.12 and
    without from 3.12; escaped (every non-ASCII character as \\uXXXX, 6 bytes, or 12 past the BMP) is never
    smaller, so measured so it holds for both."""
    return len(json.dumps(response))


def proxy_text_bytes(text: str) -> int:
    """What `text` (a response body or a part of one) adds to the proxy response: escaped as a JSON string."""
    return len(json.dumps(text)) - 2


def document_bytes(doc: Any) -> int:
    """What a JSON document adds to a response body's share of the proxy response (see proxy_response_bytes)."""
    return proxy_text_bytes(json_body.encode(doc))


def page_length(documents: Sequence[Any], budget: int = MAX_PAGE_BYTES) -> int:
    """How many of `documents`, from the first, fit in `budget` bytes of a JSON list inside a proxy response
    (document_bytes); at least one."""
    used = 2
    for count, doc in enumerate(documents):
        used += document_bytes(doc) + (1 if count else 0)
        if used > budget and count:
            return count
    return len(documents)
