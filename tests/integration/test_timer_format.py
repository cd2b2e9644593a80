"""Timer formats across releases (docs/upgrades.md, "Timers"): 1.2.0's timers still dispatch, and a timer of a
newer format goes back to the timer queue untouched: never delivered by this release, never dropped, never
dead-lettered."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hourglass.adapters.timer_queue import SEND_BACK_SECONDS, TIMER_FORMAT, read_timers
from hourglass.errors import NewerFormatError, ValidationError
from hourglass.service.dispatch import Dispatcher
from moto.sqs.models import sqs_backends

from stacks.hourglass_stack import MAX_RECEIVE_COUNT
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

NEWER = json.dumps({"fv": TIMER_FORMAT + 1, "q": "orders", "id": "m1", "v": 1, "due": 1, "sent": 1, "x": [1]})


def stored(h: Harness) -> list[dict[str, Any]]:
    """The timer queue's messages as moto keeps them: body, receives, seconds until visible."""
    [queue] = [q for q in sqs_backends["123456789012"]["us-east-1"].queues.values() if q.name == "timer"]
    now_ms = time.time() * 1000
    return [
        {"body": m.body, "receives": m.approximate_receive_count, "delay": round((m.delayed_until - now_ms) / 1000)}
        for m in queue._messages
    ]


def receive_as_lambda(h: Harness) -> list[str]:
    """One poll of the timer queue as Lambda's event source mapping makes it: the batch's failed records stay,
    the others are deleted. Delays are lifted (the fake clock stands in for them)."""
    for message in sqs_backends["123456789012"]["us-east-1"].queues["timer"]._messages:
        message.delayed_until = 0.0
    url = h.ctx.settings.timer_queue_url
    got = h.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=0)
    records = got.get("Messages", [])
    receipts = {m["MessageId"]: m["ReceiptHandle"] for m in records}
    receives = {m["MessageId"]: int(m["Attributes"]["ApproximateReceiveCount"]) for m in records}
    bodies = [(m["MessageId"], m["Body"]) for m in records]
    failed = Dispatcher(h.ctx).run_batch(bodies, receipts=receipts, receives=receives)
    for m in records:
        if m["MessageId"] not in failed:
            h.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return failed


def test_a_timer_names_the_format_it_is_written_in(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 0})
    harness.sweep()
    assert [t["json"]["fv"] for t in harness.timers()] == [TIMER_FORMAT]


def test_a_timer_of_release_1_2_0_without_a_format_is_dispatched(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 0})
    harness.sweep()
    [timer] = harness.timers()
    old = {key: value for key, value in timer["json"].items() if key != "fv"}
    assert harness.dispatch([{**timer, "body": json.dumps(old), "json": old}]) == []
    assert get(harness, created["id"])["status"] == "delivered"


def test_a_newer_timer_is_not_delivered_and_goes_back_unchanged_with_a_delay(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 0})
    harness.sweep()
    [timer] = harness.timers()
    body = json.dumps({**timer["json"], "fv": TIMER_FORMAT + 1})
    assert Dispatcher(harness.ctx).run_batch([("r1", body)]) == []
    assert (get(harness, created["id"])["status"], harness.receiver.requests) == ("pending", [])
    assert stored(harness) == [{"body": body, "receives": 0, "delay": SEND_BACK_SECONDS}]


def test_a_newer_timer_never_uses_up_the_receives_that_lead_to_the_dlq(harness: Harness) -> None:
    harness.sqs.send_message(QueueUrl=harness.ctx.settings.timer_queue_url, MessageBody=NEWER)
    failed = [receive_as_lambda(harness) for _ in range(MAX_RECEIVE_COUNT + 2)]
    assert (failed, [(m["body"], m["receives"]) for m in stored(harness)]) == (
        [[]] * (MAX_RECEIVE_COUNT + 2),
        [(NEWER, 0)],
    )


class RefusingTimers:
    """A timer queue whose sends SQS refuses; visibility changes are recorded."""

    def __init__(self) -> None:
        self.hidden: dict[str, int] = {}

    def send_back(self, bodies: list[str], delay_seconds: int = SEND_BACK_SECONDS) -> set[int]:
        return set(range(len(bodies)))

    def hide(self, receipts: dict[str, int]) -> None:
        self.hidden.update(receipts)


def test_a_newer_timer_that_cannot_be_sent_back_stays_failed_and_hidden_for_the_delay(harness: Harness) -> None:
    refusing = RefusingTimers()
    harness.ctx.timers = refusing  # type: ignore[assignment]
    failed = Dispatcher(harness.ctx).run_batch([("r1", NEWER)], receipts={"r1": "handle-1"}, receives={"r1": 3})
    assert (failed, refusing.hidden) == (["r1"], {"handle-1": SEND_BACK_SECONDS})


def test_reading_a_newer_format_raises_rather_than_guessing() -> None:
    with pytest.raises(NewerFormatError):
        read_timers(NEWER)


@pytest.mark.parametrize("fv", ['"2"', "0", "true", "1.5", "null"])
def test_a_malformed_format_is_poison(fv: str) -> None:
    with pytest.raises(ValidationError):
        read_timers('{"fv":' + fv + ',"q":"q","id":"a","v":1,"due":1,"sent":1}')
