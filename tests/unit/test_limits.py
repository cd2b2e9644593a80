"""AWS's size limits at create: the stored item, the SQS envelope and list pages, in UTF-8 bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hourglass.adapters.items import message_to_item
from hourglass.core import attempts, delivery, limits, validation
from hourglass.core.admission import Fields, admit
from hourglass.core.model import HttpTarget, Message, Queue, QueueSettings, RetryPolicy, SqsTarget, Status
from hourglass.core.schedule import sweep_keys
from hourglass.errors import ValidationError

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
SQS = {"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/target"}


def dynamodb_item_size(item: dict[str, dict[str, Any]]) -> int:
    """DynamoDB's rule: attribute name bytes + value bytes (strings UTF-8; numbers at most 21 bytes)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode("utf-8"))
        else:
            size += min(21, len(value["N"]) // 2 + 2)
    return size


# The largest final attempt a finished message keeps: its 500-character error escaped to 6 bytes a character,
# its response body of 1 KiB escaped to 2 bytes a byte.
FINAL = attempts.Attempt(
    "f" * 64, 10**9, NOW, NOW, attempts.AttemptOutcome.FAILED, status_code=599, error="\x01" * 500,
    response='"' * delivery.MAX_RESPONSE,
)


def worst_message(body: Any, target: Any) -> Message:
    """Every optional attribute set, at its largest."""
    return Message(
        id="f" * 64,
        queue="q" * 64,
        body=body,
        status=Status.DELIVERING,
        created_at=NOW,
        due_at=NOW + timedelta(days=3650),
        version=10**9,
        expires_at=NOW + timedelta(days=3650),
        attempts=100,
        delivered_at=NOW,
        last_error="😀" * delivery.MAX_ERROR,
        dedup_id="d" * 128,
        target=target,
        queue_epoch=NOW,
        claimed_until=NOW,
        topic="t" * 256,
        retry=RetryPolicy(max_attempts=100, backoff_base=86400.123456, backoff_max=2592000.123456),
        attempts_base=10**9,
        schedule="s" * 64,
        occurrence_at=NOW,
        final_attempt=FINAL,
    )


HEADERS = {f"X-H{i}": '"é\t' * 1365 for i in range(32)}
CASES = [
    ("x" * 200_000, None),
    ({"k": ["é€😀" * 20_000]}, SqsTarget(SQS["queue_url"])),
    ("y" * 100_000, HttpTarget(url="https://example.com/" + "a" * 2000, headers=HEADERS)),
    ([{"\"": "\\\n"}] * 5000, HttpTarget(url="https://example.com/", headers={"A": "b"})),
]


@pytest.mark.parametrize(("body", "target"), CASES)
def test_the_estimate_bounds_the_real_item_size_closely(body, target):
    message = worst_message(body, target)
    keys = sweep_keys(message.id, message.due_at, shards=1000, bucket_seconds=60)
    real = dynamodb_item_size(message_to_item(message, keys))
    estimate = limits.message_item_bytes(message)
    assert real <= estimate <= real + limits.FIXED_ITEM_BYTES


@pytest.mark.parametrize("body", ["x" * 262_000, {"é": ["€" * 50_000]}, list(range(30_000))])
def test_the_envelope_bound_covers_the_real_sqs_envelope(body):
    message = worst_message(body, SqsTarget(SQS["queue_url"]))
    real = len(delivery.sqs_envelope(message, attempt=10**9).encode())
    assert real == limits.sqs_envelope_bytes(message)


def batch(message: dict[str, Any], settings: QueueSettings = QueueSettings()) -> Any:
    """A POST's requests, admitted."""
    queue = Queue("orders", settings, NOW)
    requests = validation.message_batch({"messages": [message]}, settings, NOW)
    return [admit(queue, r, NOW, "f" * 32, Fields.in_batch(i)) for i, r in enumerate(requests)]


def refused(message: dict[str, Any], settings: QueueSettings = QueueSettings()) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        batch(message, settings)
    return info.value


def test_long_latin1_headers_with_a_large_body_are_refused_naming_the_headers():
    # 32 headers of 4,096 characters "é": 256 KiB of UTF-8 alone, and a 200 KB body besides.
    target = {"type": "http", "url": "https://example.com/", "headers": {f"X-{i}": "é" * 4096 for i in range(32)}}
    err = refused({"body": "x" * 150_000, "target": target})
    assert (err.field, err.code) == ("messages[0].target.headers", "too_large")


def test_a_large_body_with_headers_over_the_item_limit_is_refused_naming_the_body():
    target = {"type": "http", "url": "https://example.com/", "headers": {f"X-{i}": "é" * 2000 for i in range(32)}}
    err = refused({"body": "x" * 262_000, "target": target})
    assert (err.field, err.code) == ("messages[0].body", "too_large")


def test_a_body_of_exactly_256_kib_is_accepted_for_http_targets():
    assert batch({"body": "x" * (256 * 1024 - 2), "target": {"type": "http", "url": "https://example.com/"}})


def test_a_body_whose_sqs_envelope_is_over_256_kib_is_refused():
    err = refused({"body": "x" * (256 * 1024 - 2), "target": SQS})
    assert (err.field, err.code) == ("messages[0].body", "too_large")


def test_the_queue_target_counts_when_the_message_has_none():
    settings = QueueSettings(target=SqsTarget(SQS["queue_url"]))
    assert refused({"body": "x" * (256 * 1024 - 2)}, settings).field == "messages[0].body"


def test_the_largest_body_that_fits_an_sqs_envelope_is_accepted():
    size = limits.SQS_MESSAGE_BYTES - limits.ENVELOPE_OVERHEAD - 2
    assert batch({"body": "x" * size, "target": SQS})


def test_timer_messages_carry_nothing_sized():
    from hourglass.adapters.timer_queue import Timer, pack_to_json

    pack = [Timer("q" * 64, "f" * 64, 10**12, 10**15, 10**15) for _ in range(10)]
    assert len(pack_to_json(pack).encode()) < 4096


def test_a_page_is_cut_where_it_would_exceed_the_budget():
    docs = [{"body": "x" * 100} for _ in range(10)]
    one = limits.document_bytes(docs[0])
    assert limits.page_length(docs, budget=2 + 3 * one + 2) == 3


def test_a_page_that_fits_is_whole():
    docs = [{"body": "x"}] * 5
    assert limits.page_length(docs, budget=10_000) == 5


def test_a_page_keeps_at_least_one_document():
    assert limits.page_length([{"body": "x" * 500}], budget=10) == 1


def test_fifty_full_bodies_make_a_page_under_lambdas_limit():
    docs = [{"body": "é" * (128 * 1024)} for _ in range(50)]
    fit = limits.page_length(docs)
    assert 0 < fit < 50
    assert limits.json_bytes(docs[:fit]) <= limits.MAX_PAGE_BYTES
