"""Issue 34 through the whole-system model: below their limit, paced attempts start at their due times whatever
order they were handed off in (the reference's `check_due_start`), on a queue rate, key rates with a key
concurrency, and a queue rate with a concurrency limit. Before the calendar of slots a message handed off first but
due later pushed every later hand-off behind it, within the model's 90 s allowance for a late first attempt.

The model's fixed draws seldom start a paced attempt, so these stories replay the issue's cases; `make model`
draws more."""

from __future__ import annotations

from typing import Any

from tests.model.test_regressions import replay
from tests.model.test_system_model import SystemModel


def post(m: SystemModel, delay: float, key: str | None = None, name: str = "a") -> list[tuple[str, str]]:
    """One message in its own request."""
    return m.post(name=name, count=1, delay=delay, ttl=None, dedup=None, big=False, crash_at=None, flow_key=key)


def queue(m: SystemModel, rate: float | None, flow: dict[str, Any] | None = None, **more: Any) -> None:
    """Queue "a" with an HTTP target, its limits, and `more` settings the model does not draw (a second PUT)."""
    m.put_queue(name="a", kind="http", rate=rate, destination=None, attempts=3, flow=flow)
    if more:
        status, doc = m.call("PUT", "/v1/queues/a", {**m.settings["a"], **more})
        assert status == 200, doc


def test_a_message_due_sooner_starts_at_its_due_time_below_a_queue_rate() -> None:
    replay(
        lambda m: queue(m, rate=1),
        lambda m: post(m, delay=45),
        lambda m: post(m, delay=5),
        lambda m: m.time_passes(seconds=60),
    )


def test_keys_below_their_rate_start_at_their_due_times_in_any_hand_off_order() -> None:
    replay(
        lambda m: queue(m, rate=None, flow={"key_rate_limit": 5, "key_max_concurrency": 1}),
        lambda m: post(m, delay=45, key="k1"),
        lambda m: post(m, delay=30, key="k2"),
        lambda m: post(m, delay=5, key="k1"),
        lambda m: post(m, delay=10, key="k2"),
        lambda m: m.time_passes(seconds=60),
    )


def test_a_queue_rate_with_a_concurrency_limit_holds_nothing_back_below_it() -> None:
    replay(
        lambda m: queue(m, rate=1, max_concurrency=5),
        lambda m: post(m, delay=45),
        lambda m: post(m, delay=20),
        lambda m: post(m, delay=5),
        lambda m: m.time_passes(seconds=60),
    )


def test_deliver_now_on_a_rate_limited_queue_starts_at_once() -> None:
    posted: list[tuple[str, str]] = []
    replay(
        lambda m: queue(m, rate=100),
        lambda m: posted.extend(post(m, delay=200)),
        lambda m: m.deliver_now(picked=posted, crash_at=None),
        lambda m: m.time_passes(seconds=10),
    )


def test_where_the_limit_binds_it_holds_starts_back_without_a_violation() -> None:
    """Four messages due at once at 1 a second, and two keys' messages due at once at 0.5 a second: each after the
    first waits for its slot, and the model sees its limit bind (no false alarm)."""
    replay(
        lambda m: queue(m, rate=1, flow={"key_rate_limit": 0.5}),
        lambda m: m.post(name="a", count=4, delay=5, ttl=None, dedup=None, big=False, crash_at=None),
        lambda m: [post(m, delay=20, key=key) for key in ("k1", "k1", "k2")],
        lambda m: m.time_passes(seconds=60),
    )
