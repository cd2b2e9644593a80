"""Failing examples the whole-system model found, replayed step by step; each ends with the model's full check.

Those marked xfail break a rule of issue 23 that a fixing branch closes; the integrator removes the mark.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.model.test_system_model import SystemModel


def replay(*steps: Callable[[SystemModel], object]) -> None:
    machine = SystemModel()
    for step in steps:
        step(machine)
    machine.teardown()  # drains, then asserts the reference model's checks


@pytest.mark.xfail(strict=False, reason="issue 23 rule 2: bulk redeliver gives no fresh retry budget")
def test_bulk_redeliver_gives_the_retry_budget_a_single_one_does() -> None:
    replay(lambda m: m.single_and_bulk_agree(action="redeliver", attempts=2, failures=3))


@pytest.mark.xfail(strict=False, reason="issue 23 rule 3: the old schedule is listed after DELETE and re-create")
def test_a_recreated_queue_lists_none_of_its_predecessors_schedules() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=None),
        lambda m: m.delete_queue(name="a", crash_at=None),
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.schedules_belong_to_their_queue(),
    )


@pytest.mark.xfail(strict=False, reason="issue 23 rule 3: the pacing cursor survives DELETE and re-create")
def test_a_recreated_queue_inherits_no_pacing_backlog() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=0.1, destination=None, attempts=3),
        lambda m: m.post(name="a", count=20, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.delete_queue(name="a", crash_at=None),
        lambda m: m.put_queue(name="a", kind="http", rate=100, destination=None, attempts=3),
        lambda m: m.post(name="a", count=1, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.time_passes(seconds=700),
    )


@pytest.mark.xfail(strict=False, reason="issue 23 rule 4: a bulk cancel of one occurrence stops the schedule")
def test_cancelling_an_occurrence_leaves_its_schedule_running() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=300, big=False, crash_at=None),
        lambda m: m.bulk(name="a", action="cancel", seconds=60, crash_at=None),
    )


@pytest.mark.xfail(strict=False, reason="issue 23 rule 2: no failure notice for a message expired at admission")
def test_a_message_expired_at_admission_gets_its_notice() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination="http", attempts=3),
        lambda m: m.post(name="a", count=1, delay=45, ttl=10, dedup=None, big=False, crash_at=None),
    )


@pytest.mark.xfail(strict=False, reason="issue 23 rule 6: a notice a 404 destination refuses has no visible give-up")
def test_a_notice_that_can_never_be_sent_is_given_up_visibly() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination="http", attempts=1),
        lambda m: m.destination_answers(name="a", mode="permanent"),
        lambda m: m.target_answers(name="a", mode="permanent"),
        lambda m: m.post(name="a", count=1, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
    )


@pytest.mark.xfail(strict=False, reason="issue 23 rule 2: core/lifecycle has no finished -> pending transition")
def test_redelivering_a_delivered_message_is_a_legal_transition() -> None:
    def redeliver_first(m: SystemModel) -> None:
        m.redeliver(picked=created, crash_at=None)

    created: list[tuple[str, str]] = []
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: created.extend(m.post(name="a", count=1, delay=0, ttl=None, dedup=None, big=False, crash_at=None)),
        lambda m: m.time_passes(seconds=60),
        redeliver_first,
        lambda m: m.transitions_are_legal(),
    )


def crash_then_sync(path: str, write: int) -> Callable[[SystemModel], object]:
    def step(m: SystemModel) -> None:
        m.world.crashing(write, lambda: m.world.h.call("POST", path))
        m._sync_schedule("a", "s1")

    return step


@pytest.mark.xfail(
    strict=False,
    reason="new, rule 4 class: a crash after a schedule's PUT write, before its first "
    "occurrence's, leaves it listed as running and never firing",
)
def test_a_crash_between_the_schedule_and_its_first_occurrence_does_not_stall_it() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=2),
    )


@pytest.mark.xfail(
    strict=False,
    reason="new, rule 4 class: a crash in a schedule's resume, after its write and before "
    "the occurrence's, leaves it running and never firing",
)
def test_a_crash_in_a_schedule_resume_does_not_stall_it() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=None),
        lambda m: m.pause_schedule(name="a", schedule="s1", paused=True),
        crash_then_sync("/v1/queues/a/schedules/s1/resume", 2),
    )
