"""API documents for queues and messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from hourglass.core import lifecycle
from hourglass.core.document import created_doc, later_doc, message_doc, queue_doc
from hourglass.core.model import (
    HttpTarget,
    LaterTarget,
    Message,
    Queue,
    QueueSettings,
    RetryPolicy,
    SqsTarget,
    Status,
)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
SECRET = "very-secret-value"
QUEUE = Queue(
    name="orders",
    settings=QueueSettings(
        default_delay=5.0,
        ttl=60.0,
        target=HttpTarget(url="https://example.com/hook", headers={"X-Token": "t"}),
        retry=RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_max=30.0),
        signing_secret=SECRET,
    ),
    created_at=NOW,
)
MESSAGE = Message(
    id="abc",
    queue="orders",
    body={"a": 1},
    status=Status.PENDING,
    created_at=NOW,
    due_at=NOW + timedelta(seconds=30, microseconds=123456),
)


def test_queue_document_never_contains_the_signing_secret():
    doc = queue_doc(QUEUE)
    assert SECRET not in json.dumps(doc)
    assert "signing_secret" not in doc


def test_queue_document_says_whether_a_secret_is_set():
    assert queue_doc(QUEUE)["signing_secret_set"] is True
    assert queue_doc(Queue("q", QueueSettings(), NOW))["signing_secret_set"] is False


def test_queue_document_never_contains_the_next_signing_secret():
    rolling = Queue("q", QueueSettings(signing_secret=SECRET, signing_secret_next="next-" + SECRET), NOW)
    doc = queue_doc(rolling)
    assert SECRET not in json.dumps(doc)
    assert doc["signing_secret_next_set"] is True and "signing_secret_next" not in doc


def test_queue_document_fields():
    assert queue_doc(QUEUE) == {
        "name": "orders",
        "default_delay": 5.0,
        "max_delay": 31536000.0,
        "ttl": 60.0,
        "target": {"type": "http", "url": "https://example.com/hook", "headers": {"X-Token": "t"}},
        "retry": {"max_attempts": 3, "backoff_base": 2.0, "backoff_max": 30.0},
        "signing_secret_set": True,
        "signing_secret_next_set": False,
        "created_at": "2026-11-21T10:00:00.000Z",
    }


def test_queue_document_is_json_serializable():
    assert json.loads(json.dumps(queue_doc(QUEUE)))["name"] == "orders"


def test_sqs_target_document():
    queue = Queue("q", QueueSettings(target=SqsTarget(queue_url="https://sqs.x/1/q")), NOW)
    assert queue_doc(queue)["target"] == {"type": "sqs", "queue_url": "https://sqs.x/1/q"}


def test_message_document_fields_and_times():
    doc = message_doc(MESSAGE)
    assert {k: doc[k] for k in ("id", "queue", "status", "body", "attempts", "dedup_id", "last_error")} == {
        "id": "abc",
        "queue": "orders",
        "status": "pending",
        "body": {"a": 1},
        "attempts": 0,
        "dedup_id": None,
        "last_error": None,
    }
    assert doc["created_at"] == "2026-11-21T10:00:00.000Z"
    assert doc["due_at"] == "2026-11-21T10:00:30.123Z"
    assert (doc["expires_at"], doc["delivered_at"]) == (None, None)


def test_message_document_renders_other_offsets_in_utc():
    plus_two = timezone(timedelta(hours=2))
    message = Message(
        "m", "q", 1, Status.DELIVERED, NOW, NOW, delivered_at=datetime(2026, 11, 21, 12, 0, tzinfo=plus_two)
    )
    assert message_doc(message)["delivered_at"] == "2026-11-21T10:00:00.000Z"


def test_created_document():
    assert created_doc(MESSAGE, duplicate=True) == {
        "id": "abc",
        "due_at": "2026-11-21T10:00:30.123Z",
        "status": "pending",
        "duplicate": True,
    }


def test_later_document_uses_unix_seconds_and_retry_counts():
    message = Message(
        id="t1",
        queue="@later",
        body="hello",
        status=Status.PENDING,
        created_at=NOW,
        due_at=NOW + timedelta(seconds=15),
        attempts=2,
        target=LaterTarget(url="http://example.com/cb"),
        topic="order",
        retry=RetryPolicy(max_attempts=4, backoff_base=10),
    )
    assert later_doc(message) == {
        "id": "t1",
        "topic": "order",
        "execute_time": 1795255215,
        "max_retry": 3,
        "has_retry": 1,
        "callback": "http://example.com/cb",
        "content": "hello",
        "creat_time": 1795255200,
    }


# finished_at: the time an ending keeps when nothing else dates it (core.lifecycle), as the document shows it.
PENDING = Message(id="m", queue="q", body=1, status=Status.PENDING, created_at=NOW, due_at=NOW + timedelta(hours=1))
LATER = NOW + timedelta(minutes=5)


def test_a_cancelled_messages_document_shows_the_cancel_time():
    cancelled = lifecycle.cancel(PENDING, LATER, timedelta(days=7)).message
    assert message_doc(cancelled)["finished_at"] == "2026-11-21T10:05:00.000Z"


def test_an_expiry_without_an_attempt_keeps_its_time_until_a_redelivery():
    expired = lifecycle.finish(PENDING, Status.EXPIRED, LATER, timedelta(days=7), error="expired").message
    redelivered = lifecycle.redeliver(expired, LATER + timedelta(minutes=1)).message
    shown = [message_doc(m)["finished_at"] for m in (expired, redelivered)]
    assert shown == ["2026-11-21T10:05:00.000Z", None]
