"""A dispatcher that dies holding timers: they are handed out again within the hold, not the queue's
visibility timeout, and a begun message is taken over when its lease ends (issue 24, part 1).

SQS (moto) runs on the fixed clock here, and the timer queue has the stack's visibility timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from hourglass.core import deadline
from hourglass.core.delivery_control import MAX_TIMEOUT
from hourglass.core.timestamps import parse_rfc3339
from hourglass.errors import StoreError
from hourglass.handlers import dispatcher as dispatcher_handler
from hourglass.service.dispatch import Dispatcher
from hourglass.service.heartbeat import Heartbeat
from moto.sqs import models as sqs_models

from tests.faults.proxies import Crash
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

# The goal of issue 24: a message affected by a crash arrives at most this late.
MAX_LATE = timedelta(seconds=60)


@pytest.fixture
def h(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """SQS's clock is the harness's, and the timer queue is hidden for as long as the stack's is."""
    monkeypatch.setattr(sqs_models, "unix_time_millis", lambda: harness.clock.now.timestamp() * 1000)
    monkeypatch.setattr(sqs_models, "unix_time", lambda: harness.clock.now.timestamp())
    visibility = deadline.visibility_timeout(MAX_TIMEOUT)
    url = harness.ctx.settings.timer_queue_url
    harness.sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": str(visibility)})
    yield harness


def receive(h: Harness) -> dict[str, Any]:
    """What Lambda's event source hands the dispatcher: the visible timer records, hidden from now on."""
    url = h.ctx.settings.timer_queue_url
    got = h.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]} for m in got]
    return {"Records": records}


def invoke(h: Harness, event: dict[str, Any]) -> None:
    """One dispatcher invocation; the event source deletes the records it did not report failed."""
    answer = dispatcher_handler.handle(Dispatcher(h.ctx), event)
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    for record in event["Records"]:
        if record["messageId"] not in failed:
            h.sqs.delete_message(QueueUrl=h.ctx.settings.timer_queue_url, ReceiptHandle=record["receiptHandle"])


def dies_once(real: Callable[..., Any]) -> Callable[..., Any]:
    calls = [0]

    def call(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise Crash("dispatcher killed")
        return real(*args, **kwargs)

    return call


def lateness(h: Harness, message_id: str) -> timedelta:
    doc = get(h, message_id)
    assert doc["status"] == "delivered", doc
    return parse_rfc3339(doc["delivered_at"]) - parse_rfc3339(doc["due_at"])


def due_timer(h: Harness) -> dict[str, Any]:
    """The clock moved to when the hand-off timer shows (a second ahead of its due time), and it received."""
    h.clock.advance(4)
    event = receive(h)
    assert len(event["Records"]) == 1
    return event


def test_a_timer_whose_dispatcher_died_before_the_begin_is_delivered_within_a_minute(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": 1, "delay": 5})
    h.ctx.store.begin_delivery = dies_once(h.ctx.store.begin_delivery)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        invoke(h, due_timer(h))
    h.clock.advance(h.ctx.settings.timer_hold + 1)
    invoke(h, receive(h))
    assert lateness(h, created["id"]) <= MAX_LATE


def test_a_message_whose_dispatcher_died_mid_attempt_is_taken_over_when_its_lease_ends(h: Harness) -> None:
    make_queue(h)
    [created] = post(h, {"body": 1, "delay": 5})
    h.ctx.post = dies_once(h.ctx.post)
    with pytest.raises(Crash):
        invoke(h, due_timer(h))
    for _ in range(int(MAX_LATE.total_seconds())):  # SQS's event source polls all the while
        h.clock.advance(1)
        invoke(h, receive(h))
    assert lateness(h, created["id"]) <= MAX_LATE
    assert len(h.receiver.requests) == 1


def test_the_heartbeat_keeps_a_working_dispatchers_timer_hidden_past_the_hold(h: Harness) -> None:
    make_queue(h)
    post(h, {"body": 1, "delay": 5})
    event = due_timer(h)
    receipts = dispatcher_handler.receipts(event)
    hold = h.ctx.settings.timer_hold
    with Heartbeat(h.ctx.timers, receipts, hold, h.ctx.clock) as heartbeat:
        h.clock.advance(hold * 2 / 3)
        heartbeat.beat()
        h.clock.advance(hold * 2 / 3)
        while_held = receive(h)["Records"]
    h.clock.advance(hold)
    assert (while_held, len(receive(h)["Records"])) == ([], 1)


def always_fails(*_: Any, **__: Any) -> Any:
    raise StoreError("table unavailable")


def test_a_timer_failing_with_an_error_stays_hidden_longer_with_each_receive(h: Harness) -> None:
    # An outage of the table must not run a timer through its redrive's receives within minutes.
    make_queue(h)
    post(h, {"body": 1, "delay": 5})
    event = due_timer(h)
    event["Records"][0]["attributes"] = {"ApproximateReceiveCount": "4"}
    h.ctx.store.begin_delivery = always_fails  # type: ignore[method-assign]
    invoke(h, event)
    hold = h.ctx.settings.timer_hold
    h.clock.advance(hold * 4)
    hidden = receive(h)["Records"]
    h.clock.advance(hold * 4 + 1)
    assert (hidden, len(receive(h)["Records"])) == ([], 1)
