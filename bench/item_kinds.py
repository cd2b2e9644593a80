"""Which kind of table item a key is: the table's keys and the index entries' partitions, read with the
prefixes and partitions of `hourglass.core.keys` (the request log's classification, bench.deployed_load)."""

from __future__ import annotations

from hourglass import contract
from hourglass.core import keys

MESSAGE = "message item"
COUNTERS = "status counters"
QUEUE = "queue item"
BODY = "body item"
DEDUP = "dedup record"
HISTORY = "attempt history"
PACING = "pacing items and holders record"
SLOTS = "concurrency slots"
BREAKER = "breaker buckets"
SCHEDULE = "schedule items"
ORDER = "order items"
QUEUE_OTHER = "queue notices, ended marker, operations"
LIST_ENTRY = "list index entry"
CREATED_ENTRY = "created index entry"
DUE_ENTRY = "due-index entry"
OUTBOX = "failure-notice outbox"
BUCKETS = "due-bucket records"
SWEEPER = "sweep state and shard progress"
REGISTRY = "queue registry, running operations, schedule repair"
SCHEDULES_LIST = "list of every schedule"
WINDOWS = "window records"
UNKNOWN = "unclassified"

PARTITIONS = {
    keys.SWEEPER_PK: SWEEPER,
    keys.BUCKETS_PK: BUCKETS,
    keys.REGISTRY_PK: REGISTRY,
    keys.RUNNING_OPERATIONS_PK: REGISTRY,
    keys.REPAIR_PK: REGISTRY,
}
# Sort keys of a queue's partition; none of these prefixes is another's.
SORT_PREFIXES = (
    (keys.MESSAGE_PREFIX, MESSAGE),
    (keys.COUNT_PREFIX, COUNTERS),
    (keys.BODY_PREFIX, BODY),
    (keys.DEDUP_PREFIX, DEDUP),
    (keys.HISTORY_PREFIX, HISTORY),
    (keys.PACE_SK, PACING),
    (keys.SLOT_PREFIX, SLOTS),
    (keys.BREAKER_PREFIX, BREAKER),
    (keys.SCHEDULE_PREFIX, SCHEDULE),
    (keys.ORDER_PREFIX, ORDER),
    (keys.QUEUE_NOTICE_PREFIX, QUEUE_OTHER),
    (keys.OPERATION_PREFIX, QUEUE_OTHER),
    (keys.RATE_PREFIX, WINDOWS),
)
SORT_KEYS = {keys.QUEUE_SK: QUEUE, keys.ENDED_SK: QUEUE_OTHER}


def classify(pk: str | None, sk: str | None) -> str:
    """The kind of the table item at (pk, sk)."""
    if pk in PARTITIONS:
        return PARTITIONS[pk]
    if pk is None or sk is None:
        return UNKNOWN
    if sk in SORT_KEYS:
        return SORT_KEYS[sk]
    return next((kind for prefix, kind in SORT_PREFIXES if sk.startswith(prefix)), UNKNOWN)


def classify_entry(index: str, index_pk: str | None) -> str:
    """The kind of an index entry, by its index and its partition there."""
    if index == contract.LIST_INDEX:
        return LIST_ENTRY
    if index == contract.CREATED_INDEX:
        return CREATED_ENTRY
    if index != contract.DUE_INDEX or index_pk is None:
        return UNKNOWN
    if keys.is_outbox_pk(index_pk):
        return OUTBOX
    if index_pk == keys.SCHEDULES_PK:
        return SCHEDULES_LIST
    return DUE_ENTRY if keys.bucket_of_pk(index_pk) is not None else UNKNOWN
