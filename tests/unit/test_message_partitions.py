"""When a queue spreads its messages: a process's tally per window, reported in steps, and the record's threshold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core.message_partitions import REPORT_AT, SPREAD_AT, WINDOW_SECONDS, Tally, spreads, window_of

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_a_tally_reports_once_it_holds_report_at_messages_and_starts_again():
    tally = Tally()
    first = [tally.took("q", 30, START) for _ in range(4)]
    assert first == [None, None, None, (window_of(START), 120)]
    assert tally.took("q", 30, START) is None


def test_a_quiet_queue_never_reports():
    tally = Tally()
    reports = [tally.took("q", REPORT_AT - 1, START + timedelta(seconds=WINDOW_SECONDS * i)) for i in range(50)]
    assert reports == [None] * 50


def test_each_queue_has_its_own_tally():
    tally = Tally()
    assert tally.took("a", REPORT_AT - 1, START) is None
    assert tally.took("b", REPORT_AT - 1, START) is None
    assert tally.took("a", 1, START) == (window_of(START), REPORT_AT)


def test_a_window_total_spreads_its_queue_from_spread_at_on():
    assert (spreads(SPREAD_AT - 1), spreads(SPREAD_AT)) == (False, True)


def test_a_tally_of_a_thousand_queues_drops_the_earlier_windows_counts():
    tally = Tally()
    for i in range(1000):
        tally.took(f"old{i}", 1, START)
    tally.took("new", 1, START + timedelta(seconds=WINDOW_SECONDS))
    assert len(tally) == 1
