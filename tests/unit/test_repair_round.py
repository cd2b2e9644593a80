"""The chain repair's round: a round under way goes on at every sweep; a new one waits a minute from the last start;
a round looks at the schedules whose next occurrence is near, or that were written lately."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core.recurrence import Recurrence, Schedule
from hourglass.core.repair_round import HORIZON, ROUND_EVERY, RepairRound

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_a_repair_that_never_ran_starts_a_round() -> None:
    assert RepairRound().due(NOW)


def test_a_round_under_way_goes_on_at_once() -> None:
    assert RepairRound("orders#b", NOW).due(NOW + timedelta(seconds=1))


def test_a_new_round_waits_until_a_minute_after_the_last_one_started() -> None:
    over = RepairRound(None, NOW)
    assert not over.due(NOW + ROUND_EVERY - timedelta(milliseconds=1))
    assert over.due(NOW + ROUND_EVERY)


def test_a_start_in_the_future_does_not_hold_the_repair_off() -> None:
    assert RepairRound(None, NOW + timedelta(hours=1)).due(NOW)


def test_the_first_batch_of_a_round_records_its_start_and_later_ones_keep_it() -> None:
    first = RepairRound(None, NOW - timedelta(minutes=5)).moved_to("orders#b", NOW)
    assert first == RepairRound("orders#b", NOW)
    assert first.moved_to(None, NOW + timedelta(seconds=30)).started == NOW


def test_a_round_over_records_how_long_it_took_with_the_wait_before_the_next() -> None:
    over = RepairRound("orders#b", NOW).moved_to(None, NOW + timedelta(minutes=30))
    assert over.took == timedelta(minutes=30) + ROUND_EVERY


def test_a_round_looks_ahead_at_least_the_horizon_and_twice_a_long_round() -> None:
    assert RepairRound().horizon() == HORIZON
    assert RepairRound(took=timedelta(minutes=31)).horizon() == timedelta(minutes=62)


def daily(written_at: datetime | None) -> Schedule:
    rule = Recurrence(every=86400)
    return Schedule("orders", "daily", rule, {}, created_at=NOW - timedelta(days=3), written_at=written_at)


def test_a_round_looks_at_an_occurrence_due_within_the_horizon() -> None:
    old = daily(NOW - timedelta(days=3))
    assert RepairRound().looks_at(old, NOW + HORIZON, NOW)
    assert not RepairRound().looks_at(old, NOW + HORIZON + timedelta(seconds=1), NOW)


def test_a_round_looks_at_a_schedule_written_lately_however_far_its_occurrence() -> None:
    assert RepairRound().looks_at(daily(NOW - HORIZON), NOW + timedelta(hours=20), NOW)
    assert RepairRound().looks_at(daily(None), NOW + timedelta(hours=20), NOW)  # stored before it was kept
