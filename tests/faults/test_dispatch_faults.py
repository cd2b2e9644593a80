"""A dispatcher dying mid-delivery or timing out: SQS redelivers, the message ends delivered, never lost."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hourglass.adapters.http_target import HttpReply
from hourglass.core.timestamps import parse_rfc3339
from hourglass.service.dispatch import Dispatcher

from tests.faults.conftest import Faults
from tests.faults.proxies import Crash
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

# The stack's timer-queue visibility timeout: when SQS hands an unacknowledged timer out again.
VISIBILITY = timedelta(seconds=360)


def dying(h: Harness, *, after_post: bool, times: int = 1) -> None:
    """The next `times` deliveries kill their dispatcher, before or after the callback got the request."""
    real: Callable[..., HttpReply] = h.ctx.post
    left = [times]

    def post(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> HttpReply:
        if left[0] > 0:
            left[0] -= 1
            if after_post:
                real(url, body, headers, **kwargs)
            raise Crash("dispatcher killed mid-delivery")
        return real(url, body, headers, **kwargs)

    h.ctx.post = post


def redeliver(h: Harness, timers: list[dict[str, Any]], after: timedelta = VISIBILITY) -> list[str]:
    """SQS hands unacknowledged timers out again once their visibility timeout has passed."""
    h.clock.advance(after.total_seconds())
    return h.dispatch(timers)


def delivered_ids(h: Harness) -> list[str]:
    return [r["headers"]["Hourglass-Message-Id"] for r in h.receiver.requests]


def test_dispatcher_dying_after_the_callback_redelivers_and_counts_the_duplicate(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    dying(harness, after_post=True)
    with pytest.raises(Crash):
        harness.dispatch(timers)
    redeliver(harness, timers)
    doc = get(harness, created["id"])
    assert (doc["status"], delivered_ids(harness)) == ("delivered", [created["id"]] * 2)
    assert harness.ctx.metrics.counts["Redelivered"] == 1


def test_dispatcher_dying_before_the_callback_delivers_once_on_redelivery(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    dying(harness, after_post=False)
    with pytest.raises(Crash):
        harness.dispatch(timers)
    stuck = get(harness, created["id"])["status"]
    redeliver(harness, timers)
    assert (stuck, get(harness, created["id"])["status"]) == ("delivering", "delivered")
    assert delivered_ids(harness) == [created["id"]]


def test_redelivery_before_the_delivery_lease_ends_is_retried_not_dropped(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    dying(harness, after_post=False)
    with pytest.raises(Crash):
        harness.dispatch(timers)
    early = redeliver(harness, timers, after=timedelta(seconds=10))  # a visibility timeout shorter than the lease
    late = redeliver(harness, [t for t in timers if t["record"] in early])
    assert (early, late) == ([timers[0]["record"]], [])
    assert get(harness, created["id"])["status"] == "delivered"


def test_batch_timing_out_redelivers_only_what_did_not_finish(harness: Harness) -> None:
    make_queue(harness)
    created = post(harness, *({"body": i, "delay": 5} for i in range(4)))
    timers = harness.timers()
    pairs = [(t["record"], t["body"]) for t in timers]
    dispatcher = Dispatcher(harness.ctx)
    harness.clock.advance(5)
    for pair in pairs[:2]:
        dispatcher.run_batch([pair])  # finished before the Lambda timed out; SQS still redelivers the batch
    redeliver(harness, timers)
    assert sorted(delivered_ids(harness)) == sorted(m["id"] for m in created)
    assert [get(harness, m["id"])["status"] for m in created] == ["delivered"] * 4


def test_recording_the_outcome_failing_redelivers_and_ends_delivered(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    faults.ddb.fail("put_item", code="ProvisionedThroughputExceededException", status=400, times=None)
    failed = harness.dispatch(timers)
    faults.ddb.heal()
    redeliver(harness, timers)
    assert failed == [timers[0]["record"]]
    assert get(harness, created["id"])["status"] == "delivered"
    assert delivered_ids(harness) == [created["id"]] * 2


def test_early_timer_whose_resend_fails_fails_alone_in_its_batch(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    [soon] = post(harness, {"body": 1, "delay": 5})
    [far] = post(harness, {"body": 2, "delay": 20})
    timers = {t["json"]["id"]: t for t in harness.timers()}
    faults.sqs.fail("send_message_batch", times=None)
    harness.clock.advance(5)
    batch = [(timers[i]["record"], timers[i]["body"]) for i in (soon["id"], far["id"])]
    failed = Dispatcher(harness.ctx).run_batch(batch)
    assert failed == [timers[far["id"]]["record"]]
    assert get(harness, soon["id"])["status"] == "delivered"


def test_timer_that_beats_its_write_is_looked_at_again_within_seconds(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    early: list[str] = []
    # the dispatcher gets the hand-off timer between the ingest's send and its write
    faults.ddb.before("batch_write_item", lambda: early.extend(harness.dispatch(harness.timers())))
    [created] = post(harness, {"body": 1})
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert (early, doc["status"], delivered_ids(harness)) == ([], "delivered", [created["id"]])
    assert parse_rfc3339(doc["delivered_at"]) - parse_rfc3339(doc["due_at"]) <= timedelta(seconds=2)


def test_write_landing_between_a_failed_start_and_the_lookup_is_still_delivered(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    # what `pending(v1) -> delivering` sees when the item is not there yet; the lookup then finds it written
    faults.ddb.fail("update_item", code="ConditionalCheckFailedException", status=400)
    harness.dispatch(harness.timers())
    harness.dispatch(harness.timers())
    assert get(harness, created["id"])["status"] == "delivered"


def test_a_dispatcher_whose_lease_ran_out_keeps_the_timer_its_successor_may_still_need(harness: Harness) -> None:
    """A is slow past its lease; B takes the same SQS message over and dies mid-delivery. A must not
    acknowledge the timer (SQS may delete the message on A's old receipt handle): it is the only way
    forward of a message left `delivering` by B."""
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    [timer] = harness.timers()
    record = [(timer["record"], timer["body"])]
    real: Callable[..., HttpReply] = harness.ctx.post
    calls: list[str] = []

    def post_(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> HttpReply:
        calls.append(url)
        if len(calls) == 1:  # A, mid-request: its lease runs out and B gets the timer again
            harness.clock.advance(harness.ctx.settings.delivery_lease + 1)
            with pytest.raises(Crash):
                Dispatcher(harness.ctx).run_batch(record)
        elif len(calls) == 2:  # B dies after its begin write
            raise Crash("dispatcher killed mid-delivery")
        return real(url, body, headers, **kwargs)

    harness.ctx.post = post_
    harness.clock.advance(5)
    kept = Dispatcher(harness.ctx).run_batch(record)  # A's outcome write finds B's version
    harness.clock.advance(harness.ctx.settings.delivery_lease + 1)
    Dispatcher(harness.ctx).run_batch(record)  # what SQS hands out again: B's message, taken over
    assert (kept, get(harness, created["id"])["status"]) == ([timer["record"]], "delivered")
