"""The chain repair's round: a round under way goes on at every sweep; a new one waits a minute from the last start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core.repair_round import ROUND_EVERY, RepairRound

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
    assert first.moved_to(None, NOW + timedelta(seconds=30)) == RepairRound(None, NOW)
