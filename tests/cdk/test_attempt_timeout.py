"""The stack makes a 120 s attempt safe: no killed attempt, no second receiver while it may run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from hourglass import contract
from hourglass.core import deadline
from hourglass.core.delivery_control import MAX_TIMEOUT

from tests.cdk.test_stack import synth

DISPATCHER = "hourglass.handlers.dispatcher.handler"


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def _dispatcher(template: Template) -> dict[str, Any]:
    found = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": DISPATCHER}})
    assert len(found) == 1
    return next(iter(found.values()))["Properties"]


def _timer_queue(template: Template) -> dict[str, Any]:
    found = template.find_resources("AWS::SQS::Queue", {"Properties": {"RedrivePolicy": Match.any_value()}})
    assert len(found) == 1
    return next(iter(found.values()))["Properties"]


def test_dispatcher_outlives_the_longest_attempt(template: Template) -> None:
    longest = deadline.MAX_SLEEP + deadline.BEGIN_TO_START + MAX_TIMEOUT + deadline.BOOKKEEPING
    assert _dispatcher(template)["Timeout"] >= longest


def test_timer_visibility_outlives_six_dispatcher_timeouts(template: Template) -> None:
    assert _timer_queue(template)["VisibilityTimeout"] >= deadline.visibility_timeout(MAX_TIMEOUT)


def test_a_longest_attempts_lease_ends_before_its_timer_is_visible_again(template: Template) -> None:
    begin = datetime(2030, 1, 1, tzinfo=UTC)
    lease = (deadline.delivery_lease(begin, MAX_TIMEOUT) - begin).total_seconds()
    assert max(lease, contract.DEFAULT_DELIVERY_LEASE) < _timer_queue(template)["VisibilityTimeout"]


def test_dispatcher_batch_stays_ten_records(template: Template) -> None:
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {"BatchSize": 10})
