"""Paced timers: a rate-limited queue's timer targets its slot and carries its latest start; others are unchanged."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hourglass.adapters.timer_queue import pack_to_json, read_timers
from hourglass.core import handoff, lifecycle
from hourglass.core.handoff import DueEntry, Timer, Timing
from hourglass.core.model import Message, Status
from hourglass.core.pacing import Slot
from hourglass.core.timestamps import from_ms, to_ms

NOW = datetime(2030, 1, 1, 9, tzinfo=UTC)
TIMING = Timing(shards=4, bucket_seconds=60, lookahead=30, safety=10)


def message(due: datetime) -> Message:
    return Message("m1", "q", "x", Status.PENDING, NOW, due)


def test_paced_and_refused_timers_read_back_from_a_pack() -> None:
    timers = [
        Timer("q", "a", 1, 1000, 5),
        Timer("q", "b", 1, 1050, 5, latest_ms=2000),
        Timer("q", "c", 2, 1100, 5, latest_ms=2050, waits=3),
        Timer("q", "d", 1, 1150, 5, waits=1),
    ]
    assert read_timers(pack_to_json(timers)) == timers and read_timers(pack_to_json(timers[2:3])) == timers[2:3]


def test_an_unlimited_queue_timer_body_has_no_new_fields() -> None:
    assert set(json.loads(Timer("q", "a", 1, 1000, 5).to_json())) == {"q", "id", "v", "due", "sent"}


def test_a_paced_placement_targets_the_slot_and_leases_from_it() -> None:
    due = NOW + timedelta(seconds=2)
    placement = handoff.place(message(due), NOW, TIMING, written_first=True)
    slot = Slot(to_ms(due) + 40_000, to_ms(due) + 40_950)
    paced = handoff.paced(placement, slot, NOW, TIMING)
    assert paced.timer is not None and placement.lease is not None and paced.lease is not None
    assert (paced.timer.timer.due_ms, paced.timer.timer.latest_ms) == (slot.start_ms, slot.latest_ms)
    assert paced.timer.delay_seconds == 40 and paced.lease - placement.lease == timedelta(seconds=40)
    assert paced.claim() is not None and paced.claim().slot == slot  # type: ignore[union-attr]
    assert paced.keys == handoff.keys_of("m1", from_ms(slot.start_ms), TIMING) != placement.keys


def test_a_claims_timer_carries_its_slot() -> None:
    slot = Slot(to_ms(NOW) + 5_000, to_ms(NOW) + 5_250)
    scheduled = handoff.timer_for(DueEntry("q", "a", 3, to_ms(NOW)), NOW, slot)
    assert (scheduled.timer.slot, scheduled.delay_seconds) == (slot, 3)


def test_an_early_timer_is_resent_with_its_slot_and_refusals() -> None:
    timer = Timer("q", "a", 1, to_ms(NOW) + 10_000, 5, latest_ms=to_ms(NOW) + 10_950, waits=2)
    again = handoff.resend(timer, NOW).timer
    assert (again.due_ms, again.latest_ms, again.waits, from_ms(again.sent_ms)) == (
        timer.due_ms,
        timer.latest_ms,
        2,
        NOW,
    )


def test_put_back_is_pending_again_with_the_attempt_given_back() -> None:
    begun = Message("m1", "q", "x", Status.DELIVERING, NOW, NOW, version=4, attempts=2, claimed_until=NOW)
    change = lifecycle.put_back(begun)
    got = change.message
    assert (got.status, got.version, got.attempts, got.due_at, got.claimed_until) == (Status.PENDING, 5, 1, NOW, None)
    assert (change.expected_version, change.expected_status) == (4, Status.DELIVERING)
