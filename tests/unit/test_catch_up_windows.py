"""Schedule occurrences against a delivery window (pure, fixed times): those a closed window defers are not
missed; of one closed stretch `skip` and `latest` store the latest for the opening, `all` each (ALL_MAX at most)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from hourglass.core import catch_up
from hourglass.core.cron import parse_cron
from hourglass.core.document import schedule_doc
from hourglass.core.recurrence import CatchUp, Recurrence, Schedule
from hourglass.core.timestamps import format_rfc3339
from hourglass.core.window import Window

# Business hours in UTC, every day: closed from 18:00 to 09:00 (the next day).
OFFICE = Window(timezone="UTC", start=time(9), end=time(18))
DAY = datetime(2026, 11, 23, tzinfo=UTC)


def every(seconds: int, policy: CatchUp = CatchUp.SKIP, jitter: int = 0) -> Schedule:
    rule = Recurrence(every=seconds, catch_up=policy, jitter=jitter)
    return Schedule(queue="q", name="s", recurrence=rule, body=1, created_at=DAY)


def at(hour: int, minute: int = 0, day: int = 0) -> datetime:
    return DAY + timedelta(days=day, hours=hour, minutes=minute)


def test_skip_stores_only_the_latest_occurrence_of_a_closed_stretch() -> None:
    assert catch_up.next_planned(every(300), at(17, 55), at(17, 55), OFFICE) == at(8, 55, day=1)


def test_latest_stores_only_the_latest_occurrence_of_a_closed_stretch() -> None:
    assert catch_up.next_planned(every(300, CatchUp.LATEST), at(17, 55), at(17, 55), OFFICE) == at(8, 55, day=1)


def test_all_stores_the_oldest_of_the_stretchs_all_max_latest() -> None:
    first = catch_up.next_planned(every(300, CatchUp.ALL), at(17, 55), at(17, 55), OFFICE)
    assert first == at(9, day=1) - timedelta(minutes=5 * catch_up.ALL_MAX)


def test_all_chains_each_occurrence_of_the_stretch_at_the_opening() -> None:
    plan = every(300, CatchUp.ALL)
    assert catch_up.next_planned(plan, at(8, 0, day=1), at(9, 0, day=1) + timedelta(seconds=1), OFFICE) == at(8, 5, 1)


def test_an_occurrence_the_window_deferred_is_not_missed_at_the_opening() -> None:
    assert catch_up.delivers(every(300), at(8, 55, day=1), at(9, day=1) + timedelta(seconds=1), OFFICE)


def test_it_is_missed_once_the_first_occurrence_after_the_opening_is_due_too() -> None:
    assert not catch_up.delivers(every(300), at(8, 55, day=1), at(9, 5, day=1) + timedelta(seconds=1), OFFICE)


def test_an_occurrence_inside_the_window_is_stored_as_it_comes() -> None:
    assert catch_up.next_planned(every(300), at(10), at(10), OFFICE) == at(10, 5)


def test_without_a_window_nothing_changes() -> None:
    assert catch_up.next_planned(every(300), at(17, 55), at(17, 55), None) == at(18)


def test_next_due_at_shows_the_opening_for_an_occurrence_the_window_defers() -> None:
    daily = Schedule(queue="q", name="s", recurrence=Recurrence(cron=parse_cron("0 7 * * *")), body=1, created_at=DAY)
    assert schedule_doc(daily, at(10), OFFICE)["next_due_at"] == [
        "2026-11-24T09:00:00.000Z",
        "2026-11-25T09:00:00.000Z",
        "2026-11-26T09:00:00.000Z",
    ]


def test_next_due_at_lists_one_occurrence_for_a_closed_stretch() -> None:
    assert schedule_doc(every(300), at(17, 52), OFFICE)["next_due_at"] == [
        "2026-11-23T17:55:00.000Z",
        "2026-11-24T09:00:00.000Z",  # 08:55, the stretch's latest, at the opening
        "2026-11-24T09:00:00.000Z",  # 09:00 itself
    ]


def test_next_due_at_shows_the_jitter_of_an_occurrence_inside_the_window() -> None:
    plan = every(3600, jitter=600)
    due = [plan.due(at(hour)) for hour in (11, 12, 13)]
    assert schedule_doc(plan, at(10, 30), OFFICE)["next_due_at"] == [format_rfc3339(d) for d in due]
