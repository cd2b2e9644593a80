"""The load bench's classification of the request log's keys: each key builder's output is its kind."""

from __future__ import annotations

import pytest
from hourglass import contract
from hourglass.core import keys

from bench import item_kinds as kinds

QUEUE = "orders"

TABLE_KEYS = [
    ((QUEUE, keys.message_sk("01HX")), kinds.MESSAGE),
    ((keys.LATER_QUEUE, keys.message_sk("01HX")), kinds.MESSAGE),
    ((QUEUE, keys.count_sk(1_700_000_000_000, 3)), kinds.COUNTERS),
    ((QUEUE, keys.QUEUE_SK), kinds.QUEUE),
    ((QUEUE, keys.body_sk("01HX", 2)), kinds.BODY),
    ((QUEUE, keys.dedup_sk("d-1")), kinds.DEDUP),
    ((QUEUE, keys.history_key("01HX", 1)), kinds.HISTORY),
    ((QUEUE, keys.pace_sk(None, (1_000, 42))), kinds.PACING),
    ((QUEUE, keys.pace_sk("k", (1_000, 42))), kinds.PACING),
    ((QUEUE, keys.slot_key(7)), kinds.SLOTS),
    ((QUEUE, keys.slot_key(7, "k")), kinds.SLOTS),
    ((QUEUE, keys.breaker_sk(1, 2, 3)), kinds.BREAKER),
    ((QUEUE, keys.breaker_sk(1, 2)), kinds.BREAKER),
    ((QUEUE, keys.schedule_sk("daily")), kinds.SCHEDULE),
    ((QUEUE, keys.order_sk("k")), kinds.ORDER),
    ((QUEUE, keys.queue_notice_sk("n-1")), kinds.QUEUE_OTHER),
    ((QUEUE, keys.ENDED_SK), kinds.QUEUE_OTHER),
    ((QUEUE, keys.operation_sk("op-1")), kinds.QUEUE_OTHER),
    ((keys.BUCKETS_PK, keys.bucket_sk(29_000_000)), kinds.BUCKETS),
    ((keys.SWEEPER_PK, keys.SWEEPER_STATE_SK), kinds.SWEEPER),
    ((keys.SWEEPER_PK, keys.shard_sk(5)), kinds.SWEEPER),
    ((keys.REGISTRY_PK, QUEUE), kinds.REGISTRY),
    ((keys.RUNNING_OPERATIONS_PK, keys.running_operation_sk(QUEUE, "op-1")), kinds.REGISTRY),
    ((keys.REPAIR_PK, keys.REPAIR_SK), kinds.REGISTRY),
]

INDEX_ENTRIES = [
    ((contract.DUE_INDEX, keys.bucket_pk(29_000_000, 5)), kinds.DUE_ENTRY),
    ((contract.DUE_INDEX, keys.OUTBOX_PK), kinds.OUTBOX),
    ((contract.DUE_INDEX, keys.outbox_pk("m1")), kinds.OUTBOX),
    ((contract.DUE_INDEX, keys.SCHEDULES_PK), kinds.SCHEDULES_LIST),
    ((contract.LIST_INDEX, QUEUE), kinds.LIST_ENTRY),
    ((contract.CREATED_INDEX, QUEUE), kinds.CREATED_ENTRY),
]


@pytest.mark.parametrize(("key", "kind"), TABLE_KEYS, ids=[f"{k[0]}|{k[1]}" for k, _ in TABLE_KEYS])
def test_each_key_builder_is_classified_as_its_kind(key: tuple[str, str], kind: str) -> None:
    assert kinds.classify(*key) == kind


@pytest.mark.parametrize(("entry", "kind"), INDEX_ENTRIES, ids=[f"{e[0]}|{e[1]}" for e, _ in INDEX_ENTRIES])
def test_each_index_entry_is_classified_as_its_kind(entry: tuple[str, str], kind: str) -> None:
    assert kinds.classify_entry(*entry) == kind


def test_a_key_of_no_builder_is_unclassified() -> None:
    assert kinds.classify(QUEUE, "zz#what") == kinds.UNKNOWN
    assert kinds.classify_entry(contract.DUE_INDEX, "later#") == kinds.UNKNOWN
