"""Storage keys: no two kinds of item can collide, in the table, the due index or S3."""

from __future__ import annotations

import uuid
from itertools import permutations

import pytest
from hourglass.core import keys
from hourglass.core.validation import QUEUE_NAME

# Every key constant of core.keys, by the partition whose sort keys (or, for partitions, whose names) it
# begins. A constant added to core.keys without a place here fails test_every_key_constant_has_a_partition.
QUEUE_PARTITION = (
    keys.QUEUE_SK,
    keys.BREAKER_PREFIX,
    keys.ENDED_SK,
    keys.PACE_SK,
    keys.SLOT_PREFIX,
    keys.MESSAGE_PREFIX,
    keys.HISTORY_PREFIX,
    keys.DEDUP_PREFIX,
    keys.BODY_PREFIX,
    keys.SCHEDULE_PREFIX,
    keys.OPERATION_PREFIX,
    keys.COUNT_PREFIX,
    keys.QUEUE_NOTICE_PREFIX,
    keys.ORDER_PREFIX,
    keys.RATE_PREFIX,
)
SWEEPER_PARTITION = (keys.SWEEPER_STATE_SK, keys.SHARD_PREFIX)
REPAIR_PARTITION = (keys.REPAIR_SK,)
TABLE_PARTITIONS = (
    keys.LATER_QUEUE,
    keys.SWEEPER_PK,
    keys.REGISTRY_PK,
    keys.RUNNING_OPERATIONS_PK,
    keys.REPAIR_PK,
    keys.BUCKETS_PK,
)
DUE_INDEX_PARTITIONS = (keys.OUTBOX_PK, keys.SCHEDULES_PK)
GROUPS = {
    "queue partition": QUEUE_PARTITION,
    "@sweeper": SWEEPER_PARTITION,
    "@schedules": REPAIR_PARTITION,
    "table partitions": TABLE_PARTITIONS,
    "due-index partitions": DUE_INDEX_PARTITIONS,
}


def test_every_key_constant_has_a_partition():
    constants = {value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)}
    placed = {value for group in GROUPS.values() for value in group}
    assert constants == placed


@pytest.mark.parametrize("group", GROUPS, ids=str)
def test_no_kind_of_key_begins_another_of_the_same_partition(group):
    """A `begins_with` query of one kind never reads another's items, and no two kinds build the same key."""
    for one, other in permutations(GROUPS[group], 2):
        assert not other.startswith(one), f"{one!r} begins {other!r} in the {group}"


def test_scoped_prefixes_are_queue_partition_kinds_but_never_messages_or_their_records():
    scoped = set(keys.QUEUE_SCOPED_PREFIXES)
    assert scoped <= set(QUEUE_PARTITION)
    assert not scoped & {keys.MESSAGE_PREFIX, keys.HISTORY_PREFIX, keys.DEDUP_PREFIX, keys.BODY_PREFIX}


@pytest.mark.parametrize("partition", TABLE_PARTITIONS)
def test_reserved_partitions_are_no_queue_a_client_can_name(partition):
    assert not QUEUE_NAME.fullmatch(partition)


@pytest.mark.parametrize("partition", DUE_INDEX_PARTITIONS)
def test_due_index_partitions_of_their_own_are_no_due_bucket(partition):
    assert keys.bucket_of_pk(partition) is None
    assert not keys.bucket_pk(12345, 3).startswith(partition)


def test_a_due_bucket_partition_reads_back_its_bucket():
    assert keys.bucket_of_pk(keys.bucket_pk(29491200, 7)) == 29491200


def test_a_due_sort_key_reads_back_its_due_time_and_id():
    assert keys.split_sort_key(keys.sort_key(5, "ab12")) == (5, "ab12")


def test_a_deferred_messages_sort_key_reads_back_the_time_it_was_scheduled_for_within_its_due_bounds():
    sk = keys.sort_key(5000, "ab-12", scheduled_ms=1000)
    assert keys.sort_key_parts(sk) == (5000, 1000, "ab-12") and keys.split_sort_key(sk) == (5000, "ab-12")
    assert keys.sort_key_bound(5000, upper=False) < sk < keys.sort_key_bound(5000, upper=True)


def test_one_message_range_holds_its_messages_and_nothing_else_of_the_queue():
    low, high = keys.message_range("a")
    assert low <= keys.message_sk("a" + "f" * 31) <= high
    outside = [keys.history_key("a1", 1), keys.body_sk("a1", 1), keys.dedup_sk("a1"), keys.message_sk("b0")]
    assert not any(low <= key <= high for key in outside)


def test_every_breaker_counter_of_a_window_is_in_its_range():
    low, high = keys.breaker_range(5, 10, 12)
    counters = [keys.breaker_sk(5, 10), keys.breaker_sk(5, 12), keys.breaker_sk(5, 11, 0), keys.breaker_sk(5, 12, 15)]
    assert all(low <= sk <= high for sk in counters)


def test_no_breaker_counter_outside_a_window_is_in_its_range():
    low, high = keys.breaker_range(5, 10, 12)
    outside = [keys.breaker_sk(5, 9, 15), keys.breaker_sk(5, 13), keys.breaker_sk(6, 11, 0), keys.breaker_sk(4, 11)]
    assert not any(low <= sk <= high for sk in outside)


# the failure-notice outbox -----------------------------------------------------------------------
def test_outbox_entries_spread_over_every_outbox_shard():
    partitions = {keys.outbox_pk(f"{i:032x}") for i in range(2000)}
    assert partitions == set(keys.outbox_shards())


def test_an_outbox_entry_keeps_its_partition_from_try_to_try():
    assert keys.outbox_pk("0f3a9c") == keys.outbox_pk("0f3a9c")


def test_every_outbox_partition_and_only_those_are_outbox_partitions():
    assert all(keys.is_outbox_pk(pk) for pk in keys.outbox_pks())
    assert not any(keys.is_outbox_pk(pk) for pk in (keys.SCHEDULES_PK, keys.bucket_pk(123, 4), None))


def test_no_outbox_partition_is_a_due_bucket():
    assert all(keys.bucket_of_pk(pk) is None for pk in keys.outbox_pks())


def test_ids_of_release_1_2_0_stay_in_their_queues_partition():
    for message_id in (uuid.uuid4().hex, uuid.uuid5(uuid.NAMESPACE_URL, "x").hex, "abc", "0" * 64):
        assert (keys.spread_of(message_id), keys.message_pk("orders", message_id)) == (1, "orders")


def test_spread_ids_cover_every_spread_partition_of_their_queue_and_read_back_the_queue():
    pks = {keys.message_pk("orders", keys.spread_id(uuid.uuid4().hex, 64)) for _ in range(2000)}
    assert pks == set(keys.message_pks("orders", 64)[1:])
    assert {keys.queue_of_pk(pk) for pk in pks} == {"orders"}


def test_a_spread_id_names_the_partitions_it_was_spread_over():
    message_id = keys.spread_id(uuid.uuid4().hex, 16)
    assert keys.spread_of(message_id) == 16
    assert keys.message_pk("q", message_id) == f"q#{keys.shard_of(message_id, 16)}"


@pytest.mark.parametrize("partitions", [0, 1, 3, 2**16])
def test_a_spread_over_no_power_of_two_from_2_to_2_15_is_refused(partitions):
    with pytest.raises(ValueError):
        keys.spread_id(uuid.uuid4().hex, partitions)


def test_no_spread_partition_is_a_queue_a_client_can_name():
    assert not any(QUEUE_NAME.fullmatch(pk) for pk in keys.message_pks("orders", 64)[1:])


def test_a_dedup_record_spreads_by_its_dedup_id_only_in_a_spread_queue():
    assert keys.dedup_pk("orders", "d1", 1) == "orders"
    assert {keys.dedup_pk("orders", f"d{i}", 64) for i in range(2000)} == set(keys.message_pks("orders", 64)[1:])


def test_slots_of_layout_1_are_in_their_queues_partition():
    assert {keys.slot_pk("q", slot, key, 1) for slot in range(1000) for key in (None, "k")} == {"q"}


def test_a_queues_slots_of_layout_2_are_slot_group_to_a_partition_of_their_own():
    pks = [keys.slot_pk("q", slot, None, 2) for slot in range(1000)]
    assert max(pks.count(pk) for pk in set(pks)) == keys.SLOT_GROUP
    assert not set(pks) & set(keys.message_pks("q", 64)) and {keys.queue_of_pk(pk) for pk in pks} == {"q"}


def test_a_keys_slots_of_layout_2_spread_over_the_key_slot_partitions():
    pks = {keys.slot_pk("q", slot, f"key{k}", 2) for k in range(500) for slot in range(keys.SLOT_GROUP * 2)}
    assert len(pks) == keys.KEY_SLOT_PARTITIONS
    assert not pks & {keys.slot_pk("q", slot, None, 2) for slot in range(1000)}
