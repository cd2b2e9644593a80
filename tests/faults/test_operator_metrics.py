"""Operators see stuck messages (issue 10): `StuckDelivering` when an attempt sat in `delivering` past its
lease, `DeadLetterTimers` for each timer in the DLQ; the values the functions emit, EMF lines included."""

from __future__ import annotations

import json
from dataclasses import replace
from io import StringIO
from typing import Any

import pytest
from hourglass.adapters.metrics import Metrics
from hourglass.handlers import dispatcher as dispatcher_handler
from hourglass.service.dead_letters import DeadLetters
from hourglass.service.dispatch import Dispatcher

from tests.faults.proxies import Crash
from tests.faults.test_trust import dlq_event
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

DLQ_URL = "http://127.0.0.1/123456789012/timer-dlq"


def crash_mid_delivery(h: Harness) -> tuple[str, dict[str, Any]]:
    [created] = post(h, {"body": 1, "delay": 5})
    [timer] = h.timers()
    real = h.ctx.post

    def die(*_: Any, **__: Any) -> Any:
        raise Crash("dispatcher killed mid-delivery")

    h.ctx.post = die
    with pytest.raises(Crash):
        h.dispatch([timer])
    h.ctx.post = real
    return created["id"], timer


def emitted(metrics: Metrics) -> dict[str, Any]:
    """The figures of one flush's EMF documents that carry the all-queues series (the alarms read it)."""
    stream = StringIO()
    metrics.stream, metrics.emit_lines = stream, True
    metrics.flush()
    documents = [json.loads(line) for line in stream.getvalue().splitlines()]
    return {
        key: value
        for doc in documents
        if [] in doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
        for key, value in doc.items()
        if key not in ("_aws", "Queue")
    }


def test_a_takeover_of_an_attempt_past_its_lease_counts_one_stuck_message(harness: Harness) -> None:
    make_queue(harness)
    message_id, timer = crash_mid_delivery(harness)
    harness.clock.advance(harness.ctx.settings.delivery_lease + 1)
    harness.dispatch([timer])  # SQS hands the timer out again after its visibility timeout
    figures = emitted(harness.ctx.metrics)  # before an API call flushes them
    assert (get(harness, message_id)["status"], figures["StuckDelivering"], figures["Redelivered"]) == (
        "delivered",
        1,
        1,
    )


def test_deliveries_without_a_takeover_count_no_stuck_message(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 5}, {"body": 2, "delay": 5})
    harness.dispatch(harness.timers())
    assert (harness.ctx.metrics.counts["Delivered"], "StuckDelivering" in harness.ctx.metrics.counts) == (2, False)


def dead_letter(h: Harness, timer: dict[str, Any]) -> list[Any]:
    h.ctx.settings = replace(h.ctx.settings, timer_dlq_url=DLQ_URL)
    answer = dispatcher_handler.handle(Dispatcher(h.ctx), dlq_event(h, timer["body"]))
    return list(answer["batchItemFailures"])


def test_a_dead_lettered_timer_of_a_stuck_message_counts_the_timer_and_the_stuck_message(harness: Harness) -> None:
    make_queue(harness)
    message_id, timer = crash_mid_delivery(harness)
    harness.clock.advance(3600)
    failures = dead_letter(harness, timer)
    counts = harness.ctx.metrics.counts
    figures = (counts["DeadLetterTimers"], counts["StuckDelivering"], counts["TimerDeadLettered"])
    assert (failures, get(harness, message_id)["status"], figures) == ([], "failed", (1, 1, 1))


def test_a_dead_lettered_timer_of_a_delivered_message_counts_the_timer_only(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 5})
    [timer] = harness.timers()
    harness.dispatch([timer])
    dead_letter(harness, timer)
    counts = harness.ctx.metrics.counts
    assert (counts["DeadLetterTimers"], "StuckDelivering" in counts, "TimerDeadLettered" in counts) == (
        1,
        False,
        False,
    )


def test_a_dead_lettered_timer_is_emitted_for_all_queues(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": 1, "delay": 5})
    [timer] = harness.timers()
    harness.dispatch([timer])
    harness.ctx.metrics.flush()  # what the delivery counted goes first
    harness.ctx.settings = replace(harness.ctx.settings, timer_dlq_url=DLQ_URL)
    DeadLetters(harness.ctx).run_batch([("r1", timer["body"], 11)])
    assert emitted(harness.ctx.metrics) == {"DeadLetterTimers": 1}
