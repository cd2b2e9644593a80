"""Queue delivery control: validation of the v1.1 queue fields and their document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.adapters.items import control_from_stored, control_to_stored
from hourglass.core.delivery_control import PAUSE_READ_MAX_AGE, PAUSE_SETTLE, pause_read_fresh
from hourglass.core.document import control_doc
from hourglass.core.model import DeliveryControl, FlowControl, HttpTarget, Ordering, SqsTarget
from hourglass.core.validation import delivery_control
from hourglass.errors import ValidationError


def field_of(doc: dict) -> str:
    with pytest.raises(ValidationError) as info:
        delivery_control(doc)
    return info.value.field


def test_no_fields_means_no_limits_and_the_default_timeout():
    control = delivery_control({})
    assert control == DeliveryControl(None, None, 15.0, None, False)
    assert not control.limited


def test_all_fields_are_read():
    control = delivery_control(
        {
            "rate_limit": 20,
            "max_concurrency": 5,
            "timeout": 30,
            "failure_destination": {"type": "sqs", "queue_url": "https://sqs.example/1/dead"},
        }
    )
    assert control == DeliveryControl(20.0, 5, 30.0, SqsTarget("https://sqs.example/1/dead"), False)
    assert control.limited


@pytest.mark.parametrize("rate", [0.1, 1, 10_000])
def test_rate_limit_bounds_are_inclusive(rate):
    assert delivery_control({"rate_limit": rate}).rate_limit == rate


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"rate_limit": 0.09}, "rate_limit"),
        ({"rate_limit": 10_001}, "rate_limit"),
        ({"rate_limit": "5"}, "rate_limit"),
        ({"rate_limit": True}, "rate_limit"),
        ({"rate_limit": 1e400}, "rate_limit"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": 1001}, "max_concurrency"),
        ({"max_concurrency": 2.5}, "max_concurrency"),
        ({"timeout": 0.5}, "timeout"),
        ({"timeout": 121}, "timeout"),
        ({"timeout": None}, "timeout"),
        ({"failure_destination": {"type": "later", "url": "https://x.example"}}, "failure_destination.type"),
        ({"failure_destination": {"type": "http", "url": "ftp://x.example"}}, "failure_destination.url"),
        ({"failure_destination": {"type": "sqs"}}, "failure_destination.queue_url"),
        ({"failure_destination": "https://x.example"}, "failure_destination"),
        ({"paused": "yes"}, "paused"),
    ],
)
def test_bad_values_name_their_field(doc, field):
    assert field_of(doc) == field


def test_http_failure_destination_keeps_its_headers():
    doc = {"failure_destination": {"type": "http", "url": "https://x.example/dead", "headers": {"X-Token": "t"}}}
    assert delivery_control(doc).failure_destination == HttpTarget("https://x.example/dead", {"X-Token": "t"})


def test_failure_destination_headers_follow_the_target_rules():
    doc = {"failure_destination": {"type": "http", "url": "https://x.example", "headers": {"Host": "y"}}}
    assert field_of(doc) == "failure_destination.headers.Host"


def test_a_paused_field_in_a_put_body_leaves_the_current_state():
    assert delivery_control({"paused": False}, paused=True).paused is True
    assert delivery_control({"paused": True}, paused=False).paused is False


def test_document_shows_every_field():
    control = DeliveryControl(2.5, None, 15.0, HttpTarget("https://x.example"), True)
    assert control_doc(control) == {
        "rate_limit": 2.5,
        "max_concurrency": None,
        "timeout": 15.0,
        "failure_destination": {"type": "http", "url": "https://x.example", "headers": {}},
        "paused": True,
        "window": None,
        "paused_reason": None,
        "circuit_breaker": None,
        "flow_control": None,
        "ordering": None,
    }


def test_stored_ordering_reads_back_equal():
    control = DeliveryControl(ordering=Ordering(on_failure="hold"))
    assert control_from_stored(control_to_stored(control), paused=False) == control


def test_stored_flow_control_reads_back_equal():
    control = DeliveryControl(3.0, flow_control=FlowControl(key_rate_limit=2.0, key_max_concurrency=1))
    assert control_from_stored(control_to_stored(control), paused=False) == control


def test_flow_control_is_validated_with_its_field_named():
    with pytest.raises(ValidationError) as info:
        delivery_control({"flow_control": {"key_rate_limit": 0}})
    assert info.value.field == "flow_control.key_rate_limit"


def test_defaults_store_nothing():
    assert control_to_stored(DeliveryControl(paused=True)) == {}


def test_stored_control_reads_back_equal():
    control = DeliveryControl(0.5, 3, 120.0, SqsTarget("https://sqs.example/1/q"), True)
    assert control_from_stored(control_to_stored(control), paused=True) == control


def test_a_stored_control_beyond_todays_bounds_reads_as_written():
    doc = {"rate_limit": 50_000, "max_concurrency": 5000, "timeout": 900, "failure_destination": None}
    assert control_from_stored(doc, paused=False) == DeliveryControl(50_000.0, 5000, 900.0, None, False)


def test_a_pause_read_decides_starts_for_one_second_only():
    sent = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    assert pause_read_fresh(sent, sent + timedelta(seconds=1))
    assert not pause_read_fresh(sent, sent + timedelta(seconds=1.001))


def test_pause_answers_only_after_every_earlier_read_has_gone_stale():
    assert PAUSE_SETTLE > PAUSE_READ_MAX_AGE
