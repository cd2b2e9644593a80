"""A message's fields are declared once (`core.model.Carried` and `MessageFields`): admission keeps each,
occurrences carry each from their schedule, documents show each and validation accepts each."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, time
from typing import Any

import pytest
from hourglass.core import admission, validation
from hourglass.core.document import message_doc, schedule_doc
from hourglass.core.model import (
    Carried,
    HttpTarget,
    MessageFields,
    NewMessage,
    Queue,
    QueueSettings,
    RetryPolicy,
    SqsTarget,
)
from hourglass.core.recurrence import Recurrence, Schedule
from hourglass.core.window import DAYS, Window
from hourglass.errors import ValidationError

NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
QUEUE = Queue("orders", QueueSettings(target=SqsTarget("https://sqs.eu-west-1.amazonaws.com/1/q")), NOW)
WINDOW = Window(timezone="UTC", days=frozenset(range(7)), start=time(0, 0), end=time(23, 59))
# A value other than its default for every field a message keeps: a new field needs one here.
SAMPLES: dict[str, Any] = {
    "target": HttpTarget("https://example.com/hook"),
    "window": WINDOW,
    "flow_key": "tenant-7",
    "priority": 8,
    "dedup_id": "order-7",
    "topic": "billing",
    "retry": RetryPolicy(max_attempts=2),
    "schedule": "daily",
    "occurrence_at": NOW,
}
CARRIED = {f.name: SAMPLES[f.name] for f in fields(Carried)}
# The contract's fields of one message of a create request, and of a schedule.
CONTRACT_MESSAGE = {"body", "delay", "deliver_at", "timezone", "ttl", "dedup_id", "target", "window"}
CONTRACT_MESSAGE |= {"flow_key", "priority"}
CONTRACT_SCHEDULE = {"cron", "every", "timezone", "start_at", "end_at", "body", "target", "window", "catch_up"}
CONTRACT_SCHEDULE |= {"jitter", "flow_key", "priority"}


def schedule() -> Schedule:
    return Schedule("orders", "daily", Recurrence(every=3600), {"n": 1}, NOW, **CARRIED)


def test_every_kept_field_has_a_sample() -> None:
    assert set(SAMPLES) == {f.name for f in fields(MessageFields)}


def test_admission_keeps_every_field_of_its_request() -> None:
    message = admission.admit(QUEUE, NewMessage(body={"n": 1}, **SAMPLES), NOW, "a" * 32)
    assert {name: getattr(message, name) for name in SAMPLES} == SAMPLES


def test_an_occurrence_carries_every_carried_field_of_its_schedule() -> None:
    occurrence = admission.occurrence(schedule(), QUEUE, NOW, NOW)
    assert {name: getattr(occurrence, name) for name in CARRIED} == CARRIED


def test_the_documents_show_every_carried_field() -> None:
    message = admission.admit(QUEUE, NewMessage(body={"n": 1}, **CARRIED), NOW, "a" * 32)
    shown = {
        "target": {"type": "http", "url": "https://example.com/hook", "headers": {}},
        "window": {"timezone": "UTC", "days": list(DAYS), "from": "00:00", "to": "23:59", "exclude_dates": []},
        "flow_key": "tenant-7",
        "priority": 8,
    }
    for doc in (message_doc(message), schedule_doc(schedule(), NOW)):
        assert {name: doc[name] for name in CARRIED} == shown


def test_validation_accepts_exactly_the_contract_fields() -> None:
    assert validation.MESSAGE_FIELDS == CONTRACT_MESSAGE
    assert validation.SCHEDULE_FIELDS == CONTRACT_SCHEDULE


def test_a_field_hourglass_sets_is_refused_in_a_request() -> None:
    with pytest.raises(ValidationError) as refused:
        validation.new_message({"body": 1, "topic": "billing"}, 0, QUEUE.settings, NOW)
    assert refused.value.field == "messages[0].topic"


def test_a_request_gives_its_message_each_carried_field() -> None:
    doc = {
        "body": 1,
        "target": {"type": "http", "url": "https://example.com/hook"},
        "window": {"from": "00:00", "to": "23:59"},
        "flow_key": "tenant-7",
        "priority": 8,
    }
    assert validation.new_message(doc, 0, QUEUE.settings, NOW) == NewMessage(body=1, **CARRIED)
