"""Fixed stories of ordered queues (v1.3) through the whole-system model: each ends with the model's full check,
and each start of an ordered queue was checked (`Reference.check_order`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.model.test_system_model import SystemModel

HOLD = {"by": "flow_key", "on_failure": "hold"}
CONTINUE = {"by": "flow_key"}


def replay(*steps: Callable[[SystemModel], object]) -> int:
    """The story's steps, then the drain and the checks; how many starts `check_order` judged."""
    machine = SystemModel()
    checked = [0]
    check = machine.reference.check_order

    def counted(*args: Any) -> None:
        checked[0] += 1
        check(*args)

    setattr(machine.reference, "check_order", counted)  # noqa: B010 (a method replaced on one instance)
    for step in steps:
        step(machine)
    machine.teardown()
    return checked[0]


def queue(
    ordering: dict[str, str] | None, rate: float | None = None, attempts: int = 3
) -> Callable[[SystemModel], None]:
    return lambda m: m.put_queue(
        name="a", kind="http", rate=rate, destination=None, attempts=attempts, ordering=ordering
    )


def post(
    count: int, flow_key: str | None, delay: float = 0, priority: int | None = None
) -> Callable[[SystemModel], Any]:
    return lambda m: m.post(
        name="a",
        count=count,
        delay=delay,
        ttl=None,
        dedup=None,
        big=False,
        crash_at=None,
        flow_key=flow_key,
        priority=priority,
    )


def test_a_key_of_a_failing_target_goes_on_in_order() -> None:
    checked = replay(
        queue(CONTINUE),
        lambda m: m.target_answers(name="a", mode="transient"),
        post(4, "k1"),
        post(4, "k2", delay=5),
        lambda m: m.time_passes(seconds=10),
        lambda m: m.target_answers(name="a", mode="ok"),
        lambda m: m.time_passes(seconds=200),
    )
    assert checked >= 8


def test_a_held_key_waits_for_its_release() -> None:
    checked = replay(
        queue(HOLD, attempts=1),
        lambda m: m.target_answers(name="a", mode="permanent"),
        post(2, "k1"),
        lambda m: m.time_passes(seconds=10),
        lambda m: m.target_answers(name="a", mode="ok"),
        post(2, "k1"),
        lambda m: m.time_passes(seconds=60),
        lambda m: m.release_key(name="a", flow_key="k1"),
        lambda m: m.time_passes(seconds=60),
    )
    assert checked >= 4


def test_a_dispatcher_dying_mid_story_leaves_one_in_flight_per_key() -> None:
    checked = replay(
        queue(CONTINUE),
        post(20, "k1"),
        lambda m: m.dispatcher_dies(crash_at=2),
        lambda m: m.time_passes(seconds=60),
        lambda m: m.dispatcher_dies(crash_at=3),
        post(4, None, delay=5),
        lambda m: m.time_passes(seconds=700),
    )
    assert checked >= 20


def test_a_rate_limited_ordered_queue_with_priorities() -> None:
    checked = replay(
        queue(CONTINUE, rate=1),
        post(4, "k1", priority=0),
        post(4, "k1", priority=9),
        post(4, "k2"),
        lambda m: m.time_passes(seconds=200),
    )
    assert checked >= 12


def test_ordering_removed_and_given_again() -> None:
    """Judged until the PUT without ordering (starts from then on are not); nothing lost, the drain's checks."""
    replay(
        queue(CONTINUE),
        lambda m: m.target_answers(name="a", mode="transient"),
        post(4, "k1"),
        lambda m: m.time_passes(seconds=1),
        queue(None),
        lambda m: m.target_answers(name="a", mode="ok"),
        lambda m: m.time_passes(seconds=60),
        queue(HOLD),
        post(4, "k2"),
        lambda m: m.pause_or_resume(name="a", paused=True),
        lambda m: m.time_passes(seconds=10),
        lambda m: m.pause_or_resume(name="a", paused=False),
        lambda m: m.time_passes(seconds=60),
    )


def test_a_held_keys_long_line_goes_on_in_order_through_its_overflow_items() -> None:
    """The model's key item keeps 2 waiters: 8 behind a held head spill, and come back in due order."""
    checked = replay(
        queue(HOLD, attempts=1),
        lambda m: m.target_answers(name="a", mode="permanent"),
        post(1, "k1"),
        lambda m: m.time_passes(seconds=10),
        lambda m: m.target_answers(name="a", mode="ok"),
        post(8, "k1"),
        lambda m: m.time_passes(seconds=30),
        post(2, "k1", delay=1),
        lambda m: m.time_passes(seconds=30),
        lambda m: m.release_key(name="a", flow_key="k1"),
        lambda m: m.time_passes(seconds=120),
    )
    assert checked >= 11
