"""Failing examples the whole-system model found, replayed step by step; each ends with the model's full check.

Each broke a rule of issue 23 before it was fixed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.model.test_system_model import BREAKERS, WINDOWS, SystemModel


def replay(*steps: Callable[[SystemModel], object]) -> None:
    machine = SystemModel()
    for step in steps:
        step(machine)
    machine.teardown()  # drains, then asserts the reference model's checks


def test_bulk_redeliver_gives_the_retry_budget_a_single_one_does() -> None:
    replay(lambda m: m.single_and_bulk_agree(action="redeliver", attempts=2, failures=3))


def test_a_recreated_queue_lists_none_of_its_predecessors_schedules() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=None),
        lambda m: m.delete_queue(name="a", crash_at=None),
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.schedules_belong_to_their_queue(),
    )


def test_a_recreated_queue_inherits_no_pacing_backlog() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=0.1, destination=None, attempts=3),
        lambda m: m.post(name="a", count=20, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.delete_queue(name="a", crash_at=None),
        lambda m: m.put_queue(name="a", kind="http", rate=100, destination=None, attempts=3),
        lambda m: m.post(name="a", count=1, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.time_passes(seconds=700),
    )


def test_cancelling_an_occurrence_leaves_its_schedule_running() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=300, big=False, crash_at=None),
        lambda m: m.bulk(name="a", action="cancel", seconds=60, crash_at=None),
    )


def test_a_message_expired_at_admission_gets_its_notice() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination="http", attempts=3),
        lambda m: m.post(name="a", count=1, delay=45, ttl=10, dedup=None, big=False, crash_at=None),
    )


def test_a_notice_that_can_never_be_sent_is_given_up_visibly() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination="http", attempts=1),
        lambda m: m.destination_answers(name="a", mode="permanent"),
        lambda m: m.target_answers(name="a", mode="permanent"),
        lambda m: m.post(name="a", count=1, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
    )


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


def test_a_crash_between_the_schedule_and_its_first_occurrence_does_not_stall_it() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=2),
    )


def test_a_crash_in_a_schedule_resume_does_not_stall_it() -> None:
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination=None, attempts=3),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=None),
        lambda m: m.pause_schedule(name="a", schedule="s1", paused=True),
        crash_then_sync("/v1/queues/a/schedules/s1/resume", 2),
    )


# Rechecked all through the half-hour drain behind the pause (20-80 s): `make test-slow`.
@pytest.mark.slow
def test_a_paused_rate_limited_queue_keeps_its_message_alive_on_its_recheck_timer() -> None:
    # Found by the model after the fixes (not in the list): the liveness check took a paused queue's
    # pending message, which lives on the timer its dispatcher sends again on every recheck, for stuck.
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=0.1, destination=None, attempts=3),
        lambda m: m.pause_or_resume(name="a", paused=True),
        lambda m: m.post(name="a", count=1, delay=None, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.time_passes(seconds=700),
    )


# Its messages wait out the whole half-hour drain behind the pause, rechecked all along (20-100 s): `make test-slow`.
@pytest.mark.slow
def test_a_queue_its_breaker_paused_keeps_its_messages_waiting() -> None:
    # Its retried messages stay pending while it is paused: the reference learns the self-pause, not liveness.
    replay(
        lambda m: m.put_queue(name="a", kind="http", rate=None, destination="sqs", attempts=3, breaker=BREAKERS[-1]),
        lambda m: m.target_answers(name="a", mode="transient"),
        lambda m: m.post(name="a", count=3, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.time_passes(seconds=60),
        lambda m: m.only_a_breaker_pauses_a_queue_by_itself(),
        lambda m: m.time_passes(seconds=700),
    )


def test_deliver_now_on_a_queue_whose_window_is_closed_waits_for_the_opening() -> None:
    # Found by the model in a fresh run (2026-11-26): its own oracle expected no `next_attempt_at` after a
    # deliver-now, but a message due now outside its queue's window is delivered at the next opening.
    def deliver_first(m: SystemModel) -> None:
        m.deliver_now(picked=created, crash_at=None)

    created: list[tuple[str, str]] = []
    replay(
        lambda m: m.put_queue(name="b", kind="http", rate=None, destination=None, attempts=3),
        lambda m: created.extend(m.post(name="b", count=1, delay=600, ttl=None, dedup=None, big=False, crash_at=None)),
        lambda m: m.put_queue(name="b", kind="sqs", rate=1, destination="sqs", attempts=2, window=WINDOWS[2]),
        deliver_first,
    )


def test_a_key_rotation_keeps_the_queues_window() -> None:
    # Found by `make model` (2026-11-26): the model's rotation PUT left out the queue's window, breaker and flow
    # control, so the service (rightly) dropped the window the reference still held the starts to.
    replay(
        lambda m: m.put_queue(
            name="a",
            kind="http",
            rate=100,
            destination=None,
            attempts=1,
            window=WINDOWS[3],
            flow={"key_rate_limit": 0.5, "key_max_concurrency": 200},
        ),
        lambda m: m.roll_signing_secret(name="a", secrets=("old",)),
        lambda m: m.put_schedule(name="a", schedule="s1", every=60, big=False, crash_at=2, catch_up="skip", jitter=90),
    )


def test_every_window_keeps_the_rate_bounds() -> None:
    # Issue 26: the reference counts every attempt start per steady limit, queue-wide and per flow key (no key:
    # the key ""), over windows of 1, 2, 5 and 10 s. Keyed and unkeyed bursts behind a queue rate, retries, a
    # dispatcher dying mid-batch and an SQS target; it fails when pacing spaces slots half as far.
    replay(
        lambda m: m.put_queue(
            name="a", kind="http", rate=1, destination=None, attempts=2, flow={"key_rate_limit": 0.5}
        ),
        lambda m: m.put_queue(name="b", kind="sqs", rate=5, destination=None, attempts=1),
        lambda m: m.target_answers(name="a", mode="transient"),
        lambda m: m.post(name="a", count=20, delay=0, ttl=None, dedup=None, big=False, crash_at=None, flow_key="k1"),
        lambda m: m.post(name="a", count=20, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.post(name="b", count=20, delay=0, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: m.roll_signing_secret(name="a", secrets=("old",)),
        lambda m: m.time_passes(seconds=10),
        lambda m: m.dispatcher_dies(crash_at=3),
        lambda m: m.target_answers(name="a", mode="ok"),
        lambda m: m.time_passes(seconds=200),
    )
