"""Fan-out of a busy sweep over worker invocations, under mock_aws with a fixed clock: nothing lost or repeated."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import boto3
import pytest
from hourglass.adapters.fanout_invoker import FanoutInvoker
from hourglass.adapters.timer_queue import read_timers
from hourglass.core import schedule
from hourglass.core.sweep_state import SweepState
from hourglass.errors import InvokeError, ValidationError
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service.sweep import Sweeper, SweepReport

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue, post

SHARDS = 4
CAPACITY = 5


class Workers:
    """Stands in for Lambda's asynchronous Invoke: keeps the events, runs them when told to."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.events: list[dict[str, Any]] = []

    def invoke(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def run_all(self) -> list[SweepReport]:
        ctx = self.harness.ctx
        reports = [Sweeper(ctx, shards=e["shards"], until=e["until"], run_id=e["run"]).run() for e in self.events]
        self.events = []
        return reports


@pytest.fixture
def busy(harness: Harness) -> Harness:
    """Four shards, and a sweeper invocation that is assumed to claim only five entries."""
    harness.ctx.settings = replace(harness.ctx.settings, shards=SHARDS, sweep_capacity=CAPACITY)
    make_queue(harness)
    return harness


def handed_off(h: Harness) -> Counter[str]:
    return Counter(timer.id for t in h.timers() for timer in read_timers(t["body"]))


def state(h: Harness) -> SweepState:
    return h.ctx.store.load_sweep_state(SweepState(0, 0))


def scheduled(h: Harness, workers: Workers) -> SweepReport:
    return Sweeper(h.ctx, invoke=workers.invoke).run()


def fill_then_sweep(h: Harness, workers: Workers) -> list[str]:
    """A first run finds more than one invocation can claim; returns the ids due in the next window."""
    post(h, *({"body": i, "delay": 600 + i} for i in range(12)))
    h.clock.advance(400)
    scheduled(h, workers)
    h.timers()
    # Due after now + lookahead + hand-off safety: these wait for the sweep.
    ids = [m["id"] for m in post(h, *({"body": i, "delay": 400 + i} for i in range(12)))]
    h.clock.advance(120)
    return ids


def test_a_quiet_sweep_does_not_fan_out(busy: Harness) -> None:
    workers = Workers(busy)
    post(busy, *({"body": i, "delay": 600} for i in range(3)))
    busy.clock.advance(400)
    report = scheduled(busy, workers)
    assert (report.workers, workers.events, report.handed_off) == (1, [], 3)


def test_more_due_than_one_invocation_claims_splits_the_shards_among_workers(busy: Harness) -> None:
    workers = Workers(busy)
    fill_then_sweep(busy, workers)
    report = scheduled(busy, workers)
    groups = [e["shards"] for e in workers.events]
    assert report.workers == 3  # ceil(12 due last time / 5 per invocation)
    assert sorted(s for g in [*groups, [0, 3]] for s in g) == list(range(SHARDS))


def test_every_due_message_is_handed_off_once_by_the_coordinator_and_its_workers(busy: Harness) -> None:
    workers = Workers(busy)
    ids = fill_then_sweep(busy, workers)
    scheduled(busy, workers)
    workers.run_all()
    assert handed_off(busy) == Counter(ids)


def test_the_watermark_waits_for_every_worker_then_catches_up(busy: Harness) -> None:
    workers = Workers(busy)
    fill_then_sweep(busy, workers)
    before = state(busy).watermark
    fanned_out_until = schedule.main_sweep_end(busy.clock.now, busy.ctx.settings.lookahead)
    scheduled(busy, workers)
    held = state(busy).watermark
    workers.run_all()
    busy.clock.advance(1)
    scheduled(busy, workers)
    assert held == before
    assert state(busy).watermark == fanned_out_until


def test_a_worker_that_never_runs_loses_nothing(busy: Harness) -> None:
    workers = Workers(busy)
    ids = fill_then_sweep(busy, workers)
    scheduled(busy, workers)
    # The worker lost is one with due messages in its shards (ids are random: a shard may hold none).
    due_shards = {schedule.shard_of(message_id, SHARDS) for message_id in ids}
    lost = next(e for e in workers.events if due_shards & set(e["shards"]))
    workers.events = [e for e in workers.events if e is not lost]
    workers.run_all()
    first_pass = handed_off(busy)
    busy.clock.advance(60)
    scheduled(busy, workers)  # the lost worker never reported: its shards are swept again
    workers.run_all()
    assert set(first_pass) < set(ids)
    assert first_pass + handed_off(busy) == Counter(ids)
    assert lost["shards"]


def test_an_invocation_that_fails_is_swept_by_the_scheduled_run_itself(busy: Harness) -> None:
    ids = fill_then_sweep(busy, Workers(busy))

    def refuse(event: dict[str, Any]) -> None:
        raise InvokeError("throttled")

    report = Sweeper(busy.ctx, invoke=refuse).run()
    assert report.workers == 3
    assert handed_off(busy) == Counter(ids)


def test_a_fanout_event_sweeps_only_its_shards_and_leaves_the_watermark(busy: Harness) -> None:
    ids = [m["id"] for m in post(busy, *({"body": i, "delay": 600} for i in range(12)))]
    busy.clock.advance(400)
    before = state(busy)
    report = sweeper_handler.handle(busy.ctx, {"shards": [1]}, None)
    in_shard = {i for i in ids if schedule.shard_of(i, SHARDS) == 1}
    assert set(handed_off(busy)) == in_shard and report["handed_off"] == len(in_shard)
    assert state(busy).watermark == before.watermark


def test_an_invocation_lambda_refuses_is_an_invoke_error(busy: Harness) -> None:
    invoker = FanoutInvoker("no-such-function", client=boto3.client("lambda", region_name="us-east-1"))
    with pytest.raises(InvokeError, match="no-such-function"):
        invoker.invoke({"shards": [0], "until": 1, "run": 1})


@pytest.mark.parametrize(
    "event",
    [{"shards": []}, {"shards": [SHARDS]}, {"shards": ["1"]}, {"shards": [0], "until": "soon"}, {"shards": 2}],
)
def test_a_malformed_fanout_event_is_refused(busy: Harness, event: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        sweeper_handler.handle(busy.ctx, event, None)
