"""The sample generator: realistic rows, about 1% of them bad, reproducible from a seed."""

from __future__ import annotations

import csv
import json
import shlex
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from hourglass import contract
from hourglass.core import validation
from hourglass.core.model import Queue

from devstack.config import RuntimeConfig, function_environment, target_exports
from pipeline import cells, sample, schedule_job
from pipeline.deployment import Deployment
from pipeline.planner import Planner

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
QUEUES = {name: Queue(name, validation.queue_settings(settings), START) for name, _, settings in sample.QUEUES}
# What `make spark-schedule` checks the sample's targets against: the allow-lists of `make dev`'s functions.
LOCAL_STACK = schedule_job.stack_settings(
    schedule_job.parser().parse_args(["--input", "s.csv"]),
    Deployment(table="t", timer_queue_url="http://127.0.0.1:4566/123456789012/Hourglass-TimerQueue"),
    function_environment({}),
)


def generate(path: Path, rows: int = 4000) -> list[dict[str, str]]:
    sample.write(path, sample.Generator(seed=3, start=START, bad_fraction=0.01).rows(rows))
    with path.open() as lines:
        return list(csv.DictReader(lines)) if path.suffix == ".csv" else [json.loads(line) for line in lines]


def test_about_one_percent_of_rows_are_rejected(tmp_path: Path) -> None:
    rows = generate(tmp_path / "s.csv")
    planner = Planner(QUEUES, START, "s.csv", stack=LOCAL_STACK)

    plans = [planner.plan(i, cells.document({k: v or None for k, v in r.items()})) for i, r in enumerate(rows, 1)]

    rejected = sum(p[-1] is not None for p in plans)
    assert 0.003 * len(rows) < rejected < 0.03 * len(rows)


def test_rows_spread_over_queues_and_timing_kinds(tmp_path: Path) -> None:
    rows = generate(tmp_path / "s.csv")

    queues = Counter(r["queue"] for r in rows)
    assert {"sample-orders", "sample-emails", "sample-reminders", "sample-webhooks", "sample-reports"} <= set(queues)
    assert sum(bool(r["delay"]) for r in rows) > 0.4 * len(rows)
    assert sum(bool(r["deliver_at"]) for r in rows) > 0.2 * len(rows)
    dedup = Counter(r["dedup_id"] for r in rows if r["dedup_id"])
    assert len(dedup) > 0.1 * len(rows) and max(dedup.values()) > 1


def test_same_seed_same_file(tmp_path: Path) -> None:
    assert generate(tmp_path / "a.jsonl", 500) == generate(tmp_path / "b.jsonl", 500)


def test_make_spark_schedule_exports_the_allow_lists_of_make_devs_functions() -> None:
    env = {contract.SQS_TARGETS: "orders,billing-*"}
    exported = dict(shlex.split(line)[1].split("=", 1) for line in target_exports(env).splitlines())
    functions = RuntimeConfig.from_env(env)

    assert exported[contract.SQS_TARGETS] == functions.sqs_targets == "orders,billing-*"
    assert exported[contract.SERVICE_TARGETS["lambda"]] == functions.lambda_targets
    assert exported[contract.ALLOW_PRIVATE_CALLBACKS] == "1"
