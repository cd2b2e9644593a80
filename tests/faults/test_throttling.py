"""DynamoDB throttling and 5xx answers at the HTTP layer: botocore retries them with backoff; a run that
still fails leaves the state consistent."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import botocore.endpoint
import pytest
from hourglass.adapters import aws

from tests.faults.proxies import Throttle
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post


@dataclass
class Retrying:
    """The harness store on a client built like production's (`adapters.aws`), sleeps recorded, not slept."""

    client: Any
    sleeps: list[float] = field(default_factory=list)

    def inject(self, operation: str, code: str, *, status: int = 400, times: int | None = 1) -> Throttle:
        throttle = Throttle(operation, code, status, times)
        self.client.meta.events.register_first(f"before-send.dynamodb.{operation}", throttle)
        return throttle


@pytest.fixture
def retrying(harness: Harness, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Retrying:
    # The server shares the in-process backends, so the harness's table is the one behind it.
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_endpoint)
    client = aws.client("dynamodb")
    harness.ctx.store.client = client
    state = Retrying(client)
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=state.sleeps.append))
    return state


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ProvisionedThroughputExceededException", 400),
        ("ThrottlingException", 400),
        ("InternalServerError", 500),
        ("ServiceUnavailable", 503),
    ],
)
def test_transient_errors_are_retried_with_backoff_until_the_write_lands(
    harness: Harness, retrying: Retrying, code: str, status: int
) -> None:
    throttle = retrying.inject("PutItem", code, status=status, times=3)
    make_queue(harness)
    assert throttle.answered == 3 and len(retrying.sleeps) == 3
    assert harness.ctx.store.get_queue("orders") is not None


def test_throttling_backoff_grows_exponentially(harness: Harness, retrying: Retrying) -> None:
    retrying.inject("PutItem", "ProvisionedThroughputExceededException", times=5)
    make_queue(harness)
    # full jitter: attempt n sleeps a random share of 2**n seconds
    assert len(retrying.sleeps) == 5
    assert all(0 <= slept <= 2**n for n, slept in enumerate(retrying.sleeps))


def test_throttled_claims_are_retried_and_the_sweep_hands_off(harness: Harness, retrying: Retrying) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    retrying.inject("UpdateItem", "ThrottlingException", times=2)
    report = harness.sweep()
    harness.dispatch(harness.timers())
    assert report.handed_off == 1 and len(retrying.sleeps) == 2
    assert get(harness, created["id"])["status"] == "delivered"


def test_ingest_that_stays_throttled_answers_503_and_stores_nothing(harness: Harness, retrying: Retrying) -> None:
    make_queue(harness)
    retrying.inject("BatchWriteItem", "ProvisionedThroughputExceededException", times=None)
    status, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "delay": 3}]})
    timers = harness.timers()
    harness.dispatch(timers)  # the hand-off timer was sent before the write failed
    harness.clock.advance(120)
    failed = harness.dispatch(timers)  # SQS redelivers what was not acknowledged; past the grace it is dropped
    listed = harness.ctx.store.list_messages("orders", status=None, limit=10, cursor=None)[0]
    assert (status, doc["error"]["code"]) == (503, "unavailable")
    assert (listed, failed, harness.receiver.requests) == ([], [], [])


def test_sweep_that_stays_throttled_keeps_its_watermark_and_the_next_one_hands_off(
    harness: Harness, retrying: Retrying
) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    throttle = retrying.inject("UpdateItem", "ProvisionedThroughputExceededException", times=None)
    with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
        harness.sweep()
    throttle.times = throttle.answered  # the table recovers
    harness.clock.advance(60)
    report = harness.sweep()
    harness.dispatch(harness.timers())
    assert report.handed_off == 1
    assert get(harness, created["id"])["status"] == "delivered"


def test_cancel_that_stays_throttled_answers_503_and_the_message_stays_pending(
    harness: Harness, retrying: Retrying
) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 600})
    throttle = retrying.inject("PutItem", "ThrottlingException", times=None)
    status, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    throttle.times = throttle.answered
    assert (status, get(harness, created["id"])["status"]) == (503, "pending")


def test_dispatch_that_stays_throttled_is_redelivered_and_delivers(harness: Harness, retrying: Retrying) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    throttle = retrying.inject("UpdateItem", "ProvisionedThroughputExceededException", times=None)
    failed = harness.dispatch(timers)
    stuck = get(harness, created["id"])["status"]
    throttle.times = throttle.answered
    harness.clock.advance(360)
    harness.dispatch(timers)
    assert (failed, stuck) == ([timers[0]["record"]], "pending")
    assert get(harness, created["id"])["status"] == "delivered"
