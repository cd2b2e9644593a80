"""The liveness check (devstack/liveness.py): what it calls live, and the stuck messages it finds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.adapters.timer_queue import read_timers
from hourglass.core.handoff import Scheduled

from devstack import liveness
from tests.faults.proxies import Crash
from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue, post


def crash_mid_delivery(h: Harness) -> tuple[str, dict[str, Any]]:
    """A message whose dispatcher died during the attempt: delivering under a lease; its timer."""
    [created] = post(h, {"body": 1, "delay": 5})
    [timer] = h.timers()

    def die(*_: Any, **__: Any) -> Any:
        raise Crash("dispatcher killed mid-delivery")

    h.ctx.post = die
    with pytest.raises(Crash):
        h.dispatch([timer])
    return created["id"], timer


def check(h: Harness, **kwargs: Any) -> liveness.Liveness:
    return liveness.check(h.ddb, h.ctx.settings.table, h.clock.now, **kwargs)


def test_final_indexed_and_in_flight_messages_are_live(harness: Harness) -> None:
    make_queue(harness)
    post(harness, {"body": "later", "delay": 3600})
    post(harness, {"body": "now", "delay": 1})
    harness.dispatch(harness.timers())
    crash_mid_delivery(harness)
    found = check(harness)
    assert (found.ok, found.counts) == (True, {"indexed": 1, "final": 1, "in flight": 1})


def test_a_delivering_message_past_its_lease_without_a_timer_is_stuck(harness: Harness) -> None:
    make_queue(harness)
    message_id, _ = crash_mid_delivery(harness)
    harness.clock.advance(harness.ctx.settings.delivery_lease + 1)
    assert check(harness).stuck == (f"orders/{message_id} delivering",)


def test_a_delivering_message_past_its_lease_whose_timer_is_queued_is_live(harness: Harness) -> None:
    make_queue(harness)
    message_id, timer = crash_mid_delivery(harness)
    [queued] = read_timers(timer["body"])
    harness.ctx.handoff.resend([Scheduled(queued, 0)])
    harness.clock.advance(harness.ctx.settings.delivery_lease + 1)
    timers = liveness.timer_ids(harness.sqs, harness.ctx.settings.timer_queue_url)
    found = check(harness, timers=timers)
    assert (timers, found.ok, found.counts) == ({message_id}, True, {"timer waiting": 1})


def test_a_pending_message_without_index_keys_or_lease_is_stuck(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3600})
    harness.ddb.update_item(
        TableName=harness.ctx.settings.table,
        Key={"pk": {"S": "orders"}, "sk": {"S": f"m#{created['id']}"}},
        UpdateExpression="REMOVE sweep_pk, sweep_sk, claimed_until",
    )
    assert check(harness).stuck == (f"orders/{created['id']} pending",)


def test_a_paused_queues_pending_message_past_its_lease_lives_on_its_timer(harness: Harness) -> None:
    # A paused queue's timer is sent again on every recheck: it is the message's way forward.
    make_queue(harness)
    harness.call("POST", "/v1/queues/orders/pause")
    [created] = post(harness, {"body": 1, "delay": 1})
    harness.clock.advance(harness.ctx.settings.delivery_lease + 60)
    harness.ctx.handoff.resend([Scheduled(timer, 0) for t in harness.timers() for timer in read_timers(t["body"])])
    timers = liveness.timer_ids(harness.sqs, harness.ctx.settings.timer_queue_url)
    found = check(harness, timers=timers)
    assert (timers, found.ok, found.counts) == ({created["id"]}, True, {"timer waiting": 1})


def test_other_queues_are_left_out_when_asked(harness: Harness) -> None:
    make_queue(harness)
    make_queue(harness, "other")
    crash_mid_delivery(harness)
    harness.clock.advance(timedelta(hours=1).total_seconds())
    post(harness, {"body": 1, "delay": 3600}, queue="other")
    found = check(harness, queues=["other"])
    assert (found.ok, found.counts) == (True, {"indexed": 1})
