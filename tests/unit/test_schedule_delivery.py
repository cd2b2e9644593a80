"""Occurrences of a schedule name it on delivery: an HTTP header and an SQS envelope field."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from hourglass.core import delivery
from hourglass.core.document import message_doc
from hourglass.core.model import Message, Status

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
OCCURRENCE = Message("abc", "orders", {"r": 1}, Status.PENDING, NOW, NOW, schedule="daily", occurrence_at=NOW)


def test_http_occurrence_carries_the_schedule_header() -> None:
    _, headers = delivery.http_request(OCCURRENCE, 1, headers={}, secrets=(), now=NOW)
    assert headers["Hourglass-Schedule"] == "daily"


def test_one_off_message_has_no_schedule_header() -> None:
    _, headers = delivery.http_request(replace(OCCURRENCE, schedule=None), 1, headers={}, secrets=(), now=NOW)
    assert "Hourglass-Schedule" not in headers


def test_sqs_envelope_names_the_schedule() -> None:
    assert json.loads(delivery.sqs_envelope(OCCURRENCE, 1))["schedule"] == "daily"


def test_message_document_shows_the_schedule() -> None:
    assert message_doc(OCCURRENCE)["schedule"] == "daily"
