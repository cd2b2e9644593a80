"""The sample generator: realistic rows, about 1% of them bad, reproducible from a seed."""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hourglass.core import validation
from hourglass.core.model import Queue

from devstack.config import LOCAL_SQS_TARGETS
from pipeline import cells, sample
from pipeline.planner import STRICT, Planner

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
QUEUES = {name: Queue(name, validation.queue_settings(settings), START) for name, _, settings in sample.QUEUES}
# `make dev`, which the sample is scheduled into, allows its SQS target queue.
LOCAL_STACK = replace(STRICT, sqs_targets=LOCAL_SQS_TARGETS)


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
