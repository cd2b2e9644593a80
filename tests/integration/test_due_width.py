"""Due buckets widen with what is written into them (core.due_width), under mock_aws with a fixed clock:
the sweep reads every shard a writer used, and a quiet bucket costs no write beyond its messages'."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from hourglass.adapters.timer_queue import read_timers
from hourglass.core import keys, schedule
from hourglass.core.due_width import Widths
from hourglass.service.sweep import Sweeper

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue, post

SHARDS = 2
# Small thresholds stand in for the real ones (2,000 entries a shard, records every 1,000 writes).
PER_SHARD = 10
FLUSH = 10
USUAL = 4  # messages a bucket gets at the usual rate: under one flush
DELAY = 600


@pytest.fixture
def small(harness: Harness) -> Harness:
    harness.ctx.settings = replace(harness.ctx.settings, shards=SHARDS)
    harness.ctx.bucket_widths = Widths(SHARDS, per_shard=PER_SHARD, flush=FLUSH)
    make_queue(harness)
    return harness


def index_partitions(h: Harness) -> Counter[str]:
    items = h.ddb.scan(TableName=h.ctx.settings.table, FilterExpression="attribute_exists(sweep_pk)")["Items"]
    return Counter(item["sweep_pk"]["S"] for item in items)


def bucket_records(h: Harness) -> list[dict[str, Any]]:
    got = h.ddb.query(
        TableName=h.ctx.settings.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": keys.BUCKETS_PK}},
    )
    return list(got["Items"])


def handed_off(h: Harness) -> Counter[str]:
    return Counter(timer.id for t in h.timers() for timer in read_timers(t["body"]))


def busy_bucket(h: Harness) -> list[str]:
    """50 times the usual messages into one bucket, in POSTs of 100."""
    ids: list[str] = []
    for _ in range(50 * USUAL // 100):
        ids += [m["id"] for m in post(h, *({"body": i, "delay": DELAY} for i in range(100)))]
    return ids


def test_a_bucket_written_at_the_usual_rate_has_no_record(small: Harness) -> None:
    post(small, *({"body": i, "delay": DELAY} for i in range(USUAL)))
    assert bucket_records(small) == []


def test_a_bucket_written_at_the_usual_rate_stays_at_the_deployments_shards(small: Harness) -> None:
    post(small, *({"body": i, "delay": DELAY} for i in range(USUAL)))
    shards = {int(pk.split("#")[1]) for pk in index_partitions(small)}
    assert shards <= set(range(SHARDS))


def test_a_busy_bucket_records_its_width_before_it_is_used(small: Harness) -> None:
    busy_bucket(small)
    [record] = bucket_records(small)
    used = {int(pk.split("#")[1]) for pk in index_partitions(small)}
    assert (int(record["width"]["N"]), max(used) < int(record["width"]["N"]), max(used) >= SHARDS) == (
        32,
        True,
        True,
    )


def test_a_busy_bucket_spreads_its_later_entries_over_more_partitions(small: Harness) -> None:
    busy_bucket(small)
    assert max(index_partitions(small).values()) < 100


def test_a_busy_bucket_is_swept_completely_once(small: Harness) -> None:
    ids = busy_bucket(small)
    small.clock.advance(400)
    report = small.sweep()
    assert (report.handed_off, handed_off(small)) == (len(ids), Counter(dict.fromkeys(ids, 1)))


def test_a_fanout_invocation_sweeps_the_wider_partitions_of_its_shards(small: Harness) -> None:
    ids = busy_bucket(small)
    small.clock.advance(400)
    ahead = schedule.main_sweep_end(small.clock(), small.ctx.settings.timing.sweep_ahead)
    reports = [Sweeper(small.ctx, shards=[shard], until=ahead).run() for shard in range(SHARDS)]
    assert sum(r.handed_off for r in reports) == len(ids)


def test_entries_of_the_fixed_layout_are_swept_after_an_upgrade(small: Harness) -> None:
    small.ctx.bucket_widths = None  # a process of before: every bucket at the deployment's shards
    old = [m["id"] for m in post(small, *({"body": i, "delay": DELAY} for i in range(100)))]
    small.ctx.bucket_widths = Widths(SHARDS, per_shard=PER_SHARD, flush=FLUSH)
    new = busy_bucket(small)
    small.clock.advance(400)
    small.sweep()
    assert set(handed_off(small)) == set(old + new)


def test_the_next_bucket_starts_as_wide_as_the_busy_one(small: Harness) -> None:
    busy_bucket(small)
    post(small, *({"body": i, "delay": DELAY + 60} for i in range(USUAL)))
    assert sorted(int(r["width"]["N"]) for r in bucket_records(small)) == [32, 32]


def test_ten_messages_a_second_for_a_minute_write_nothing_beyond_their_messages(harness: Harness) -> None:
    make_queue(harness)  # the defaults: 8 shards, records every 1,000 entries (250 within a second)
    for second in range(60):
        post(harness, *({"body": i, "delay": 3_600 - second} for i in range(10)))
        harness.clock.advance(1)
    assert (bucket_records(harness), len(index_partitions(harness))) == ([], 8)
