"""Hold partitions of the due index: keys, order and separation from the sweep buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core.hold import hold_keys, hold_partitions, is_held
from hourglass.core.schedule import sweep_keys

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_held_keys_sort_by_due_time_within_a_partition():
    ids = [f"{n:032x}" for n in range(40)]
    keys = [hold_keys("orders", i, T0 + timedelta(seconds=n), shards=1) for n, i in enumerate(ids)]
    assert [k.sk for k in keys] == sorted(k.sk for k in keys)


def test_a_message_is_held_in_the_partition_of_its_shard():
    keys = hold_keys("orders", "abc", T0, shards=8)
    assert keys.pk in hold_partitions("orders", 8)


def test_held_keys_are_told_apart_from_sweep_keys():
    assert is_held(hold_keys("orders", "abc", T0, shards=8).pk)
    assert not is_held(sweep_keys("abc", T0, shards=8, bucket_seconds=60).pk)
    assert not is_held(None)


def test_queues_do_not_share_hold_partitions():
    assert not set(hold_partitions("a", 8)) & set(hold_partitions("b", 8))
