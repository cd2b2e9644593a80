"""A sweeper dying between claim and send, and timer-queue sends failing: nothing stays stranded.

Claims are made for queues using an opt-in feature (`CLAIMED_QUEUE`); a queue using none is handed off without
a claim (`delivery_control.claims_hand_offs`), so a run that dies before it saves its watermark leaves its
messages to the next run, not to the recovery sweep."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hourglass.core.schedule import RECOVERY_GRACE

from tests.faults.conftest import Faults
from tests.faults.proxies import Crash, timer_for, timer_ids
from tests.integration.conftest import Harness
from tests.integration.test_flow import CLAIMED_QUEUE, get, make_queue, post


def status_of(h: Harness, *ids: str) -> list[str]:
    return [get(h, i)["status"] for i in ids]


def deliver_everything_due(h: Harness) -> None:
    """What the schedule does over time: sweep, hand the timers to the dispatcher."""
    h.sweep()
    h.dispatch(h.timers())


def test_sweeper_dying_after_claiming_is_recovered_once_the_lease_expires(harness: Harness, faults: Faults) -> None:
    make_queue(harness, settings=CLAIMED_QUEUE)
    start = harness.clock.now
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600} for i in range(3)))]
    harness.clock.advance(400)
    faults.sqs.crash("send_message_batch")
    with pytest.raises(Crash):
        harness.sweep()
    stranded = [i for i in ids if harness.ctx.store.get_message("orders", i).claimed_until]  # type: ignore[union-attr]
    harness.clock.advance(60)
    harness.sweep()
    harness.dispatch(harness.timers())
    harness.clock.now = start + timedelta(seconds=600 + RECOVERY_GRACE + 60)
    recovery = harness.sweep()
    harness.dispatch(harness.timers())
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    assert stranded and recovery.recovered == len(stranded)
    assert sorted(delivered) == sorted(ids)


def test_sweeper_dying_before_sending_unclaimed_timers_is_followed_by_the_next_run(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600} for i in range(3)))]
    harness.clock.advance(400)
    faults.sqs.crash("send_message_batch")
    with pytest.raises(Crash):
        harness.sweep()
    untouched = [harness.ctx.store.get_message("orders", i).claimed_until for i in ids]  # type: ignore[union-attr]
    harness.clock.advance(60)
    rerun = harness.sweep()
    harness.dispatch(harness.timers())
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    assert untouched == [None, None, None]
    assert rerun.handed_off == 3 and sorted(delivered) == sorted(ids)


@pytest.mark.parametrize("settings", [None, CLAIMED_QUEUE], ids=["unclaimed", "claimed"])
def test_recovery_sweep_dying_after_claiming_is_recovered_by_a_later_one(
    harness: Harness, faults: Faults, settings: dict[str, Any] | None
) -> None:
    make_queue(harness, settings=settings)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(400)
    faults.sqs.crash("send_message_batch", times=2)
    with pytest.raises(Crash):
        harness.sweep()
    harness.clock.advance(200 + RECOVERY_GRACE)
    with pytest.raises(Crash):
        harness.sweep()  # the recovery sweep claims it again, then dies too
    for _ in range(6):
        harness.clock.advance(60)
        deliver_everything_due(harness)
    assert status_of(harness, created["id"]) == ["delivered"]


@pytest.mark.parametrize("settings", [None, CLAIMED_QUEUE], ids=["unclaimed", "claimed"])
def test_late_claim_by_a_sweeper_that_then_dies_is_recovered(
    harness: Harness, faults: Faults, settings: dict[str, Any] | None
) -> None:
    make_queue(harness, settings=settings)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(600 + 100)  # the sweeper was down: it claims long after the due time
    faults.sqs.crash("send_message_batch")
    with pytest.raises(Crash):
        harness.sweep()
    for _ in range(8):
        harness.clock.advance(60)
        deliver_everything_due(harness)
    assert status_of(harness, created["id"]) == ["delivered"]


def test_sweep_send_failing_for_some_entries_releases_them_and_holds_the_watermark(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness, settings=CLAIMED_QUEUE)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600 + i} for i in range(4)))]
    harness.clock.advance(400)
    faults.sqs.fail_entries(timer_for(ids[1], ids[3]))
    first = harness.sweep()
    sent_first = sorted(timer_ids(harness.timers()))
    stored = [harness.ctx.store.get_message("orders", i) for i in ids]
    faults.sqs.heal()
    second = harness.sweep()
    sent_second = sorted(timer_ids(harness.timers()))
    assert (first.send_failed, second.handed_off) == (2, 2)
    assert sent_first == sorted([ids[0], ids[2]]) and sent_second == sorted([ids[1], ids[3]])
    assert [m.claimed_until is None for m in stored if m is not None] == [False, True, False, True]
    assert first.watermark < 600 * 1000 + harness.clock.now.timestamp() * 1000


def test_an_unclaimed_sweep_send_failing_for_some_entries_holds_the_watermark_before_the_first(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600 + i} for i in range(4)))]
    harness.clock.advance(400)
    faults.sqs.fail_entries(timer_for(ids[1], ids[3]))
    first = harness.sweep()
    timers = harness.timers()
    faults.sqs.heal()
    harness.sweep()
    again = harness.timers()
    harness.dispatch(timers + again)
    # From the earliest refused one on, the next sweep sends again: the one sent between them twice.
    assert first.send_failed == 2 and sorted(timer_ids(timers)) == sorted([ids[0], ids[2]])
    assert sorted(timer_ids(again)) == sorted(ids[1:])
    assert status_of(harness, *ids) == ["delivered"] * 4
    assert len(harness.receiver.requests) == 4


def test_sweep_send_failing_entirely_is_retried_by_the_next_sweep(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600} for i in range(12)))]
    harness.clock.advance(400)
    faults.sqs.fail("send_message_batch", times=None)
    failed = harness.sweep()
    nothing = harness.timers()
    faults.sqs.heal()
    harness.clock.advance(30)
    deliver_everything_due(harness)
    assert (failed.send_failed, nothing) == (12, [])
    assert status_of(harness, *ids) == ["delivered"] * 12


def test_ingest_send_failing_falls_back_to_the_due_index_and_is_delivered(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    faults.sqs.fail("send_message_batch", times=None)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 20} for i in range(3)))]
    faults.sqs.heal()
    harness.clock.advance(10)
    deliver_everything_due(harness)
    assert status_of(harness, *ids) == ["delivered"] * 3
    assert harness.ctx.metrics.counts["HandoffFallback"] == 3


def test_ingest_partial_send_failure_delivers_every_message_once(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    calls = iter(range(1000))
    faults.sqs.fail_entries(lambda entry: next(calls) % 2 == 0)  # every other entry, on every try
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 20} for i in range(6)))]
    faults.sqs.heal()
    for _ in range(3):
        harness.clock.advance(30)
        deliver_everything_due(harness)
    delivered = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests]
    assert status_of(harness, *ids) == ["delivered"] * 6
    assert sorted(delivered) == sorted(ids)


def test_ingest_fallback_after_the_sweep_passed_is_delivered_by_the_recovery_sweep(
    harness: Harness, faults: Faults
) -> None:
    make_queue(harness)
    harness.sweep()  # the watermark is now at now + lookahead
    faults.sqs.fail("send_message_batch", times=None)
    [created] = post(harness, {"body": 1, "delay": 60})
    faults.sqs.heal()
    for _ in range(6):
        harness.clock.advance(60)
        deliver_everything_due(harness)
    doc = get(harness, created["id"])
    assert doc["status"] == "delivered"


def test_ingest_fallback_with_dedup_ids_is_released_for_the_next_sweep(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    faults.sqs.fail("send_message_batch", times=None)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 20, "dedup_id": f"d{i}"} for i in range(3)))]
    faults.sqs.heal()
    harness.clock.advance(10)
    deliver_everything_due(harness)
    assert status_of(harness, *ids) == ["delivered"] * 3


def test_retry_whose_timer_is_not_sent_is_handed_off_by_the_recovery_sweep(harness: Harness, faults: Faults) -> None:
    make_queue(harness)
    harness.receiver.answers = [503]
    [created] = post(harness, {"body": 1, "delay": 5})
    timers = harness.timers()
    faults.sqs.fail("send_message_batch", times=None)  # the retry's timer, sent by the dispatcher
    harness.dispatch(timers)
    faults.sqs.heal()
    waiting = get(harness, created["id"])
    for _ in range(6):
        harness.clock.advance(60)
        deliver_everything_due(harness)
    assert (waiting["status"], waiting["attempts"], harness.timers()) == ("pending", 1, [])
    assert (get(harness, created["id"])["status"], len(harness.receiver.requests)) == ("delivered", 2)


def is_claim(kwargs: dict[str, object]) -> bool:
    return "claimed_until = :lease" in str(kwargs.get("UpdateExpression", ""))


def test_a_claim_that_landed_behind_a_dropped_connection_strands_nothing(harness: Harness, faults: Faults) -> None:
    """The claim committed, its caller saw a connection error: every message of the sweep (that one
    included) gets its timer now, not after its lease and the recovery sweep."""
    make_queue(harness)
    ids = [m["id"] for m in post(harness, *({"body": i, "delay": 600} for i in range(20)))]
    harness.clock.advance(595)
    faults.ddb.disconnect("update_item", kind="read", when=is_claim, after=True)
    harness.sweep()
    assert sorted(timer_ids(harness.timers())) == sorted(ids)


def carries_dedup_id(dedup_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda kwargs: f'"{dedup_id}"' in json.dumps(kwargs.get("TransactItems", []))


def test_a_batch_whose_later_dedup_write_fails_still_hands_off_the_one_stored_before(
    harness: Harness, faults: Faults
) -> None:
    """The client retries the refused batch and gets the stored message back as a duplicate, which sends no
    timer: only the first request can hand it off, on time."""
    make_queue(harness)
    batch = {"messages": [{"body": i, "delay": 5, "dedup_id": f"d{i}"} for i in range(2)]}
    faults.ddb.fail(
        "transact_write_items",
        code="TransactionCanceledException",
        status=400,
        reasons=["TransactionConflict", "None"],
        times=None,
        when=carries_dedup_id("d1"),
    )
    refused, _ = harness.call("POST", "/v1/queues/orders/messages", batch)
    faults.ddb.heal()
    status, doc = harness.call("POST", "/v1/queues/orders/messages", batch)
    harness.clock.advance(10)
    deliver_everything_due(harness)
    ids = [m["id"] for m in doc["messages"]]
    assert (refused, status, status_of(harness, *ids)) == (503, 201, ["delivered", "delivered"])
