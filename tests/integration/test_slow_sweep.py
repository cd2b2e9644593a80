"""A sweep slowed by load (issue 24, part 4), on a fake clock that every claim moves: it still hands off
ahead of time, from the look-ahead of NOW, and its timers count their delays from their send."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hourglass.adapters.timer_queue import read_timers
from hourglass.core.handoff import Scheduled
from hourglass.core.pacing import pace
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.timestamps import to_ms

from tests.integration.conftest import Harness
from tests.integration.test_flow import CLAIMED_QUEUE, make_queue, post
from tests.integration.test_rate_limits import make_queue as make_limited_queue
from tests.integration.test_rate_limits import post_burst

CLAIM_SECONDS = 0.5  # what one claim costs on a starved machine, in fake time


class SlowClaims:
    """Each claim moves the fake clock on (the sweep's threads share it, hence the lock)."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.claim = h.ctx.store.claim
        self.lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.h.clock.advance(CLAIM_SECONDS)
        return self.claim(*args, **kwargs)


class SentTimers:
    """When each timer would show on the fake clock: its send time plus its DelaySeconds."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.send = h.ctx.timers.send
        self.visible: dict[str, datetime] = {}

    def __call__(self, items: Sequence[Scheduled]) -> list[Scheduled]:
        for item in items:
            self.visible[item.timer.id] = self.h.clock.now + timedelta(seconds=item.delay_seconds)
        return list(self.send(items))


@pytest.fixture
def slow(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> tuple[Harness, SentTimers]:
    # A queue whose hand-offs are claimed: the claims are what this fake clock makes slow.
    make_queue(harness, settings=CLAIMED_QUEUE)
    sent = SentTimers(harness)
    monkeypatch.setattr(harness.ctx.store, "claim", SlowClaims(harness))
    monkeypatch.setattr(harness.ctx.timers, "send", sent)
    return harness, sent


def _due_in(h: Harness, delays: list[float]) -> dict[str, datetime]:
    """Messages the sweeper hands off (beyond ingest's hand-off window), due `delays` after 100 s from now."""
    created = post(h, *({"body": i, "delay": 100 + d} for i, d in enumerate(delays)))
    return {m["id"]: datetime.fromisoformat(m["due_at"].replace("Z", "+00:00")) for m in created}


def test_a_slow_sweep_hands_off_what_fell_inside_the_look_ahead_while_it_ran(slow: tuple[Harness, SentTimers]) -> None:
    h, sent = slow
    ahead = h.ctx.settings.timing.sweep_ahead
    first = _due_in(h, [ahead - 20 + i for i in range(20)])  # inside the window of the run's start
    later = _due_in(h, [ahead + 2 + i for i in range(5)])  # inside it only once its claims took 10 s
    h.clock.advance(100)
    h.sweep()
    assert set(first) | set(later) <= set(sent.visible)


def test_a_slow_sweeps_timers_count_their_delay_from_their_send(slow: tuple[Harness, SentTimers]) -> None:
    h, sent = slow
    ahead = h.ctx.settings.timing.sweep_ahead
    due = _due_in(h, [ahead - 15 + i * 0.5 for i in range(30)])  # the last ones claimed ~15 s after the start
    h.clock.advance(100)
    h.sweep()
    head_start = timedelta(seconds=TIMER_HEAD_START)
    late = {i: (sent.visible[i] - (at - head_start)).total_seconds() for i, at in due.items() if i in sent.visible}
    assert set(late) == set(due)
    assert all(seconds <= 0 for seconds in late.values()), late


def test_a_quick_sweep_hands_off_nothing_beyond_its_look_ahead(harness: Harness) -> None:
    make_queue(harness)
    ahead = harness.ctx.settings.timing.sweep_ahead
    inside, _beyond = post(harness, {"body": 1, "delay": 100 + ahead - 5}, {"body": 2, "delay": 100 + ahead + 5})
    harness.clock.advance(100)
    harness.sweep()
    assert [t["json"]["id"] for t in harness.timers()] == [inside["id"]]


def test_a_slow_sweeps_paced_timers_are_sent_ahead_of_their_slots_in_due_order(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slots are taken before the claims: when claiming the batch takes longer than the slots' lead, the first
    slots go by before the send. A timer that comes after its slot is re-paced by its dispatcher at the end of
    the line, after every later-due message of the batch, so the batch takes later slots in due order instead."""
    make_limited_queue(harness, "paced", rate_limit=1)
    beyond = timedelta(seconds=harness.ctx.settings.timing.sweep_ahead + 60)  # no hand-off at ingest
    due = post_burst(harness, "paced", 20, to_ms(harness.clock() + beyond + timedelta(seconds=2)))
    monkeypatch.setattr(harness.ctx.store, "claim", SlowClaims(harness))  # 20 claims: 10 s, 8 slots' worth
    harness.clock.advance(beyond.total_seconds())
    harness.sweep()
    timers = [timer for sent in harness.timers() for timer in read_timers(sent["body"])]
    assert {timer.id for timer in timers} == set(due)
    assert all(timer.latest_ms is not None and timer.latest_ms >= timer.sent_ms for timer in timers)
    in_due_order = sorted(timers, key=lambda timer: due[timer.id])
    slots = [timer.due_ms for timer in in_due_order]
    assert slots == sorted(slots) and all(timer.due_ms >= due[timer.id] for timer in timers)
    assert all(b - a >= pace(1).spacing_us / 1000 for a, b in itertools.pairwise(slots))
