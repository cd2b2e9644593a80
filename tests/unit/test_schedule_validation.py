"""Validation of the PUT schedule document and of one-off deliver_at in local time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hourglass.core import validation
from hourglass.core.cron import parse_cron
from hourglass.core.model import HttpTarget, QueueSettings
from hourglass.errors import ValidationError

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
DAILY = {"cron": "0 9 * * MON-FRI", "timezone": "Europe/London", "body": {"report": "daily"}}


def field_of(doc: object) -> str:
    with pytest.raises(ValidationError) as info:
        validation.schedule_request(doc, NOW)
    return info.value.field


def test_a_cron_schedule_is_read_with_its_zone_body_and_target():
    request = validation.schedule_request(
        {**DAILY, "target": {"type": "http", "url": "https://example.com/hook"}, "start_at": None, "end_at": None},
        NOW,
    )
    assert request.recurrence.cron == parse_cron("0 9 * * 1-5")
    assert request.recurrence.timezone == "Europe/London"
    assert request.body == {"report": "daily"}
    assert request.target == HttpTarget(url="https://example.com/hook")


def test_an_every_schedule_defaults_to_utc():
    request = validation.schedule_request({"every": 3600, "body": None}, NOW)
    assert (request.recurrence.every, request.recurrence.timezone, request.recurrence.cron) == (3600, "UTC", None)


def test_bounds_are_read_as_utc():
    request = validation.schedule_request(
        {**DAILY, "start_at": "2026-12-01T09:00:00+01:00", "end_at": "2027-01-01T00:00:00Z"}, NOW
    )
    assert request.recurrence.start_at == datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert request.recurrence.end_at == datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"body": 1}, "cron"),
        ({"cron": "* * * * *", "every": 60, "body": 1}, "cron"),
        ({"cron": "61 * * * *", "body": 1}, "cron"),
        ({"cron": "0 0 30 2 *", "body": 1}, "cron"),
        ({"cron": 5, "body": 1}, "cron"),
        ({"every": 59, "body": 1}, "every"),
        ({"every": 60.5, "body": 1}, "every"),
        ({"every": True, "body": 1}, "every"),
        ({"every": "3600", "body": 1}, "every"),
        ({**DAILY, "timezone": "Mars/Olympus"}, "timezone"),
        ({**DAILY, "timezone": None}, "timezone"),
        ({**DAILY, "start_at": "2026-12-01T09:00:00"}, "start_at"),
        ({**DAILY, "end_at": "soon"}, "end_at"),
        ({**DAILY, "end_at": "2040-01-01T00:00:00Z"}, "end_at"),
        ({**DAILY, "start_at": "2027-01-01T00:00:00Z", "end_at": "2026-12-01T00:00:00Z"}, "end_at"),
        ({"cron": "0 9 * * *"}, "body"),
        ({**DAILY, "body": "x" * (300 * 1024)}, "body"),
        ({**DAILY, "target": {"type": "ftp"}}, "target.type"),
        ({**DAILY, "target": {"type": "http", "url": "notaurl"}}, "target.url"),
        ({**DAILY, "paused": True}, "paused"),
        ([], "body"),
    ],
)
def test_bad_schedule_documents_name_the_field(doc, field):
    assert field_of(doc) == field


@pytest.mark.parametrize("name", ["daily", "A-b_9", "x" * 64])
def test_schedule_names_follow_queue_names(name):
    assert validation.schedule_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 65, "a/b", "a b", None])
def test_bad_schedule_names_are_rejected(name):
    with pytest.raises(ValidationError) as info:
        validation.schedule_name(name)
    assert info.value.field == "name"


# --- one-off deliver_at in local time ----------------------------------------------------------


def message(**fields: object):
    return validation.new_message({"body": 1, **fields}, 0, QueueSettings(), NOW)


def message_error_field(**fields: object) -> str:
    with pytest.raises(ValidationError) as info:
        message(**fields)
    return info.value.field


def test_a_local_deliver_at_resolves_in_its_zone():
    got = message(deliver_at="2026-12-24T09:00:00", timezone="America/New_York")
    assert got.deliver_at == datetime(2026, 12, 24, 14, tzinfo=UTC)


def test_a_local_deliver_at_in_the_spring_gap_moves_by_the_gap():
    got = message(deliver_at="2027-03-14T02:30:00", timezone="America/New_York")
    assert got.deliver_at == datetime(2027, 3, 14, 7, 30, tzinfo=UTC)  # 03:30 EDT


def test_a_local_deliver_at_in_the_repeated_hour_takes_the_first_pass():
    got = message(deliver_at="2027-11-07T01:30:00", timezone="America/New_York")
    assert got.deliver_at == datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"deliver_at": "2026-12-24T09:00:00+01:00", "timezone": "Europe/Paris"}, "messages[0].deliver_at"),
        ({"deliver_at": "2026-12-24T09:00:00Z", "timezone": "UTC"}, "messages[0].deliver_at"),
        ({"deliver_at": "christmas", "timezone": "UTC"}, "messages[0].deliver_at"),
        ({"deliver_at": "2026-12-24T09:00:00", "timezone": "Nowhere/City"}, "messages[0].timezone"),
        ({"deliver_at": "2026-12-24T09:00:00", "timezone": 5}, "messages[0].timezone"),
        ({"timezone": "UTC"}, "messages[0].timezone"),
        ({"delay": 5, "timezone": "UTC"}, "messages[0].timezone"),
        ({"deliver_at": "2026-12-24T09:00:00"}, "messages[0].deliver_at"),
        ({"deliver_at": "2046-12-24T09:00:00", "timezone": "UTC"}, "messages[0].deliver_at"),
        ({"deliver_at": "9999-12-31T23:59:00", "timezone": "Pacific/Kiritimati"}, "messages[0].deliver_at"),
        ({"deliver_at": "0001-01-01T00:00:00", "timezone": "Asia/Tokyo"}, "messages[0].deliver_at"),
    ],
)
def test_bad_local_deliver_at_names_the_field(fields, field):
    assert message_error_field(**fields) == field
