"""The capacity model per item (bench.capacity_items): it lists every item, and the due index's widths hold."""

from __future__ import annotations

import pytest
from hourglass.core import keys

from bench import capacity_items

# The builders and constants of core.keys that name a DynamoDB item or partition (not prefixes, ranges, parsers
# or S3 keys): each must have a row in the model.
TABLE_ITEMS = (
    "message_sk",
    "message_pk",
    "dedup_pk",
    "rate_sk",
    "slot_pk",
    "history_key",
    "dedup_sk",
    "body_sk",
    "schedule_sk",
    "schedules_sk",
    "operation_sk",
    "running_operation_sk",
    "pace_sk",
    "count_sk",
    "slot_key",
    "shard_sk",
    "bucket_pk",
    "bucket_sk",
    "breaker_sk",
    "queue_notice_sk",
    "QUEUE_SK",
    "ENDED_SK",
    "LATER_QUEUE",
    "SWEEPER_PK",
    "SWEEPER_STATE_SK",
    "REGISTRY_PK",
    "RUNNING_OPERATIONS_PK",
    "REPAIR_PK",
    "REPAIR_SK",
    "BUCKETS_PK",
    "outbox_pk",
    "SCHEDULES_PK",
)


@pytest.mark.parametrize("scenario", capacity_items.SCENARIOS, ids=lambda s: s.name)
def test_every_item_of_the_keys_module_has_a_row(scenario: capacity_items.Scenario) -> None:
    listed = " ".join(f"{row.item} {row.key}" for row in capacity_items.rows(scenario, 0.0))
    assert [name for name in TABLE_ITEMS if name not in listed] == []


def test_the_listed_names_are_the_keys_modules() -> None:
    assert [name for name in TABLE_ITEMS if not hasattr(keys, name)] == []


def test_a_bucket_at_ten_messages_a_second_costs_at_most_a_record_write_per_bucket() -> None:
    # Its first POST of 100 (the model's writer posts 100 at a time) may be the start of a burst.
    assert capacity_items.write_buckets(10.0).record_writes <= 2  # two buckets, one writer


def test_a_cold_bucket_written_at_100000_a_second_keeps_every_shard_under_the_partition_limit() -> None:
    run = capacity_items.write_buckets(100_000.0)
    assert capacity_items.index_shard_peak(run) <= capacity_items.PARTITION_WRU


def test_a_bucket_written_at_fifty_times_the_usual_rate_keeps_every_shard_under_the_partition_limit() -> None:
    run = capacity_items.write_buckets(50 * 200.0)
    assert capacity_items.index_shard_peak(run) <= capacity_items.PARTITION_WRU
