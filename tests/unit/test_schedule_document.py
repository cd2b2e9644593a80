"""How a schedule looks in API responses."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hourglass.core.cron import parse_cron
from hourglass.core.document import schedule_doc
from hourglass.core.model import SqsTarget
from hourglass.core.recurrence import Recurrence, Schedule

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
SCHEDULE = Schedule(
    queue="reports",
    name="weekday-morning",
    recurrence=Recurrence(
        cron=parse_cron("0 9 * * MON-FRI"), timezone="Europe/London", end_at=datetime(2027, 1, 1, tzinfo=UTC)
    ),
    body={"report": "daily"},
    created_at=datetime(2026, 11, 20, 8, 0, tzinfo=UTC),
    target=SqsTarget(queue_url="https://sqs.eu-west-2.amazonaws.com/123456789012/reports"),
)


def test_schedule_document_has_the_contract_fields_and_next_three_occurrences():
    assert schedule_doc(SCHEDULE, NOW) == {
        "name": "weekday-morning",
        "queue": "reports",
        "cron": "0 9 * * MON-FRI",
        "every": None,
        "timezone": "Europe/London",
        "start_at": None,
        "end_at": "2027-01-01T00:00:00.000Z",
        "body": {"report": "daily"},
        "target": {"type": "sqs", "queue_url": "https://sqs.eu-west-2.amazonaws.com/123456789012/reports"},
        "window": None,
        "catch_up": "skip",
        "jitter": 0,
        "flow_key": None,
        "priority": 5,
        "paused": False,
        "created_at": "2026-11-20T08:00:00.000Z",
        "next_due_at": ["2026-11-24T09:00:00.000Z", "2026-11-25T09:00:00.000Z", "2026-11-26T09:00:00.000Z"],
    }


def test_a_paused_schedule_has_no_next_due_times():
    assert schedule_doc(replace(SCHEDULE, paused=True), NOW)["next_due_at"] == []


def test_an_ended_schedule_has_no_next_due_times():
    assert schedule_doc(SCHEDULE, datetime(2027, 1, 1, tzinfo=UTC))["next_due_at"] == []
