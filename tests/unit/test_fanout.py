"""Fan-out planning: how many sweep workers, which shards each one gets."""

from __future__ import annotations

import pytest
from hourglass.core.fanout import invocation_count, split


@pytest.mark.parametrize(
    ("estimate", "expected"), [(0, 1), (5_000, 1), (20_000, 1), (20_001, 2), (70_000, 4), (10**9, 8)]
)
def test_workers_follow_the_estimate_up_to_one_per_shard(estimate: int, expected: int) -> None:
    assert invocation_count(estimate, 20_000, 8, lagging=False) == expected


def test_a_sweep_that_fell_behind_gets_one_worker_per_shard() -> None:
    assert invocation_count(0, 20_000, 8, lagging=True) == 8


@pytest.mark.parametrize("workers", [1, 2, 3, 8, 20])
def test_split_gives_every_shard_to_exactly_one_worker(workers: int) -> None:
    groups = split(list(range(8)), workers)
    assert sorted(s for g in groups for s in g) == list(range(8))
    assert len(groups) == min(workers, 8) and all(groups)


def test_split_balances_the_groups() -> None:
    assert sorted(len(g) for g in split(list(range(10)), 3)) == [3, 3, 4]
