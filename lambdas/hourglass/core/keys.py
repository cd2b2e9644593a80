"""Every storage key: the table's partitions, sort-key prefixes and builders, the due index's and S3's.

One place, so that no two kinds of item collide; the adapters wrap these strings in DynamoDB JSON.
"""

from __future__ import annotations

import zlib

# A queue's partition (pk = the queue's name) holds the queue item and everything scoped to the queue.
# Its sort keys: `m#` messages (what a list reads), the rest sorted outside that range.
QUEUE_SK = "#queue"
ENDED_SK = "#ended"  # when the name's last life ended (a re-create starts a new epoch after it)
PACE_SK = "#pace"
SLOT_PREFIX = "#slot#"
MESSAGE_PREFIX = "m#"
HISTORY_PREFIX = "a#"
DEDUP_PREFIX = "d#"
BODY_PREFIX = "b#"
SCHEDULE_PREFIX = "s#"
OPERATION_PREFIX = "o#"
COUNT_PREFIX = "#count#"  # the queue's status counters: `#count#<epoch ms>#<shard>`
# What one life of a queue leaves besides its messages, removed when it ends. Messages, bodies, attempt
# history and dedup records are not here: each carries its queue's epoch or goes with its message.
BREAKER_PREFIX = "#breaker#"
QUEUE_NOTICE_PREFIX = "#notice#"  # notices about the queue itself (`queue.paused`) still owed: outbox entries
ORDER_PREFIX = "#order#"  # an ordered queue's keys (v1.3): `#order#<key length>:<key>`, only while not idle
RATE_PREFIX = "#rate#"  # how many messages a queue took in a 10 s window, while it is not spread: `#rate#<window>`
QUEUE_SCOPED_PREFIXES = (
    PACE_SK,
    SLOT_PREFIX,
    SCHEDULE_PREFIX,
    OPERATION_PREFIX,
    COUNT_PREFIX,
    BREAKER_PREFIX,
    QUEUE_NOTICE_PREFIX,
    ORDER_PREFIX,
    RATE_PREFIX,
)

# Partitions of their own: queue names never start with "@" (validation.QUEUE_NAME).
LATER_QUEUE = "@later"  # the queue of `/later` messages: a queue partition like any other
SWEEPER_PK = "@sweeper"
SWEEPER_STATE_SK = "#state"
SHARD_PREFIX = "#shard#"
REGISTRY_PK = "@queues"  # sort key: the queue's name
RUNNING_OPERATIONS_PK = "@operations"  # sort key: `<queue>/<operation id>`
BUCKETS_PK = "@buckets"  # sort key: a due bucket's number (`bucket_sk`); the item holds its width (core.due_width)
REPAIR_PK = "@schedules"
REPAIR_SK = "#repair"  # where the schedule chain repair has got to in its round of every schedule

# Due index (sweep_pk, sweep_sk): numeric `<bucket>#<shard>` partitions, sorted by `<due ms>#<id>`; and
# partitions whose name is not a number, so no sweep of a due bucket reads them: the failure-notice
# outbox (sorted as the buckets) and the list of every schedule (sorted by `<queue>#<name>`).
OUTBOX_PK = "notice#"  # the outbox's prefix; also 1.2.0's one outbox partition, still read
# The outbox's partitions, `notice#<n>`: an entry's by its id, so that a burst of endings (an outage ending
# many messages failed) spreads over them; recovery queries each of them every run (docs/capacity.md).
OUTBOX_SHARDS = 16
SCHEDULES_PK = "schedules#"


def shard_of(item_id: str, shards: int) -> int:
    """The shard of an id among `shards`: stable, and even over ids."""
    return zlib.crc32(item_id.encode()) % shards


def outbox_pk(entry_id: str) -> str:
    """The outbox partition of an entry (a message's, or a queue notice's id)."""
    return f"{OUTBOX_PK}{shard_of(entry_id, OUTBOX_SHARDS)}"


def outbox_shards() -> tuple[str, ...]:
    """The outbox partitions entries are written to (`outbox_pk`)."""
    return tuple(f"{OUTBOX_PK}{shard}" for shard in range(OUTBOX_SHARDS))


def outbox_pks() -> tuple[str, ...]:
    """Every outbox partition recovery reads: the shards, and 1.2.0's unsharded one."""
    return (OUTBOX_PK, *outbox_shards())


def is_outbox_pk(pk: str | None) -> bool:
    return pk is not None and pk.startswith(OUTBOX_PK)


# A queue's messages: in its partition (`pk = queue`), or, once the queue is busy (`core/message_partitions.py`),
# spread over `<queue>#<n>` by id. Which one is in the id: a spread message's id is a UUIDv8 whose 14th hex
# digit is log2 of the partitions it was spread over (ids of release 1.2.0 are v4 and v5: in the queue's).
# Queue names never hold `#` (validation.QUEUE_NAME), so no spread partition is another queue's.
MESSAGE_PARTITIONS = 64
SPREAD_VERSION = 8  # the UUID version of a spread message's id


def is_spread_id(message_id: str) -> bool:
    return len(message_id) == 32 and message_id[12] == f"{SPREAD_VERSION:x}"


def spread_id(hex_id: str, partitions: int = MESSAGE_PARTITIONS) -> str:
    """`hex_id` (32 hex digits: a UUID's) made a spread message's id over `partitions` (a power of 2, <= 2**15)."""
    exponent = partitions.bit_length() - 1
    if len(hex_id) != 32 or partitions != 1 << exponent or not 1 <= exponent <= 15:
        raise ValueError("a spread id is 32 hex digits over 2 to 2**15 partitions")
    return f"{hex_id[:12]}{SPREAD_VERSION:x}{exponent:x}{hex_id[14:]}"


def spread_of(message_id: str) -> int:
    """How many partitions a message's queue spread its messages over when it was stored (1: not spread)."""
    return 1 << int(message_id[13], 16) if is_spread_id(message_id) else 1


def message_pk(queue: str, message_id: str) -> str:
    """The partition of a message and of everything that goes with it (bodies, attempt history)."""
    partitions = spread_of(message_id)
    return queue if partitions == 1 else f"{queue}#{shard_of(message_id, partitions)}"


def dedup_pk(queue: str, dedup_id: str, partitions: int) -> str:
    """The partition of a dedup record: a spread queue's (`partitions` its messages' spread) by the dedup id."""
    return queue if partitions == 1 else f"{queue}#{shard_of(dedup_id, partitions)}"


def message_pks(queue: str, partitions: int) -> tuple[str, ...]:
    """Every partition a queue's messages are in, the queue's own first: a list or a bulk operation reads them."""
    if partitions <= 1:
        return (queue,)
    return (queue, *(f"{queue}#{shard}" for shard in range(partitions)))


def queue_of_pk(pk: str) -> str:
    """The queue of a partition holding its messages (its own or a spread one)."""
    return pk.split("#", 1)[0]


def message_sk(message_id: str) -> str:
    return MESSAGE_PREFIX + message_id


def message_range(id_head: str) -> tuple[str, str]:
    """Inclusive sort-key range of the messages whose ids start with `id_head`."""
    return f"{MESSAGE_PREFIX}{id_head}", f"{MESSAGE_PREFIX}{id_head}~"


def history_prefix(message_id: str) -> str:
    """`begins_with` prefix of one message's history; a Query on it returns attempts in order."""
    return f"{HISTORY_PREFIX}{message_id}#"


def history_key(message_id: str, attempt: int) -> str:
    # Zero-padded so the sort key orders attempts numerically; redeliveries keep counting past 100.
    return f"{history_prefix(message_id)}{attempt:06d}"


def dedup_sk(dedup_id: str) -> str:
    return DEDUP_PREFIX + dedup_id


def body_sk(message_id: str, version: int) -> str:
    """Each version of a body is an item of its own, so a PATCH never overwrites the body an attempt
    under way is reading."""
    return f"{BODY_PREFIX}{message_id}#{version}"


def body_object_key(queue: str, message_id: str, version: int) -> str:
    """`<2 hex of the id>/<queue>/<id>/<version>`: the id's random head spreads objects over prefixes
    (S3 scales per prefix), and each body version is an object of its own, so a PATCH never
    overwrites a body an attempt under way is reading."""
    return f"{message_id[:2]}/{queue}/{message_id}/{version}"


def schedule_sk(name: str) -> str:
    return SCHEDULE_PREFIX + name


def schedules_sk(queue: str, name: str) -> str:
    return f"{queue}#{name}"


def operation_sk(operation_id: str) -> str:
    return OPERATION_PREFIX + operation_id


def running_operation_sk(queue: str, operation_id: str) -> str:
    return f"{queue}/{operation_id}"


def pace_sk(flow_key: str | None, window: tuple[int, int]) -> str:
    """The pacing item of one window (width and index, µs) of a queue's own slots (`flow_key` None) or of one of
    its flow keys' (v1.2; messages without one share ""). The index is zero-padded, so a range of one scope's
    windows is one Query; the key's length goes first, so no key's prefix is another's."""
    return f"{pace_window_prefix(flow_key, window[0])}{window[1]:015d}"


def pace_window_prefix(flow_key: str | None = None, width_us: int | None = None) -> str:
    """`begins_with` prefix of a scope's windows of one width (None: of every width; the queue's own windows
    with `flow_key` None)."""
    scope = f"{PACE_SK}#w#" if flow_key is None else f"{PACE_SK}#k#{len(flow_key)}:{flow_key}#w#"
    return scope if width_us is None else f"{scope}{width_us}#"


def rate_sk(window: int) -> str:
    return f"{RATE_PREFIX}{window}"


def count_prefix(epoch_ms: int) -> str:
    """`begins_with` prefix of the status counters of one life of a queue (its epoch, its `created_at`)."""
    return f"{COUNT_PREFIX}{epoch_ms}#"


# Each queue life's counts are spread over this many items, so that no one item takes every status change
# of a busy queue; reading them is one Query of this many small items.
COUNT_SHARDS = 16


def count_sk(epoch_ms: int, shard: int) -> str:
    return f"{count_prefix(epoch_ms)}{shard:02d}"


# Concurrency slots of a queue created by release 1.3.0 or later (its `slot_layout` 2) are in partitions of their
# own, of its life (its epoch): the queue's slots SLOT_GROUP to a partition (`<queue>#c<epoch ms>.<n>`), a flow
# key's by key and group over KEY_SLOT_PARTITIONS (`<queue>#k<epoch ms>.<n>`), so that the take per attempt of a
# busy queue is spread (docs/capacity.md), and a queue created again never meets its earlier life's leases.
# A queue created before keeps them in its own partition (layout 1) for its life: no lease is ever looked for in
# a place other than where it was taken.
SLOT_GROUP = 8
KEY_SLOT_PARTITIONS = 64


def slot_pk(queue: str, slot: int, flow_key: str | None = None, layout: int = 1, epoch_ms: int = 0) -> str:
    """The partition of a concurrency slot in `layout` (the queue's `slot_layout`) of the life `epoch_ms`."""
    if layout == 1:
        return queue
    group = slot // SLOT_GROUP
    if flow_key is None:
        return f"{queue}#c{epoch_ms}.{group}"
    return f"{queue}#k{epoch_ms}.{shard_of(f'{len(flow_key)}:{flow_key}#{group}', KEY_SLOT_PARTITIONS)}"


def slot_key(slot: int, flow_key: str | None = None) -> str:
    """A concurrency slot of the queue (None) or of one of its flow keys (v1.2)."""
    return f"{SLOT_PREFIX}{slot:04d}" if flow_key is None else f"{SLOT_PREFIX}k#{flow_key}#{slot:04d}"


def shard_sk(shard: int) -> str:
    return f"{SHARD_PREFIX}{shard}"


def bucket_pk(bucket: int, shard: int) -> str:
    return f"{bucket}#{shard}"


def bucket_sk(bucket: int) -> str:
    """The sort key of a due bucket's record (its width and the entries written into it), in bucket order."""
    return f"{bucket:012d}"


def bucket_of_pk(pk: str) -> int | None:
    """The due bucket of a due-index partition; None for a partition that is no bucket (the outbox's)."""
    head = pk.split("#", 1)[0]
    return int(head) if head.isdigit() else None


def sort_key(due_ms: int, message_id: str, scheduled_ms: int | None = None) -> str:
    """`<due ms>#<id>`; a message due after the time it was scheduled for (deferred to a window's opening,
    or retried) has `<due ms>#<scheduled ms>#<id>`, so that those sharing a due time are released in the
    order they were scheduled for. Message ids never hold `#`."""
    if scheduled_ms is None or scheduled_ms == due_ms:
        return f"{due_ms:013d}#{message_id}"
    return f"{due_ms:013d}#{scheduled_ms:013d}#{message_id}"


def split_sort_key(sk: str) -> tuple[int, str]:
    """(due ms, message id) of a due-index sort key."""
    due_ms, _, message_id = sort_key_parts(sk)
    return due_ms, message_id


def sort_key_parts(sk: str) -> tuple[int, int, str]:
    """(due ms, scheduled ms, message id) of a due-index sort key (scheduled: the due ms when not in it)."""
    parts = sk.split("#")
    due_ms = int(parts[0])
    return due_ms, int(parts[1]) if len(parts) == 3 else due_ms, parts[-1]


def sort_key_bound(due_ms: int, *, upper: bool) -> str:
    """A bound that sorts before (or after) every sort key with this due time."""
    return f"{due_ms:013d}#{'~' if upper else ''}"


# The items one circuit-breaker bucket's counts are spread over: one item takes at most 1,000 writes a second,
# and every attempt outcome of a queue is one ADD (10,000 deliveries/s on a queue: 625 a second on each).
BREAKER_SHARDS = 16


def breaker_sk(since_ms: int, bucket: int, shard: int | None = None) -> str:
    """A circuit breaker counter: per resume (a fresh window), time bucket and shard (0 to BREAKER_SHARDS - 1, any:
    they are summed), in time order. Without a shard: the bucket's single item of releases before shards, which
    sorts first among its bucket's."""
    head = f"{BREAKER_PREFIX}{since_ms:013d}#{bucket:012d}"
    return head if shard is None else f"{head}#{shard:02d}"


def breaker_range(since_ms: int, first: int, last: int) -> tuple[str, str]:
    """Inclusive sort-key range of every counter of buckets first..last of one resume (sharded or not)."""
    return breaker_sk(since_ms, first), f"{breaker_sk(since_ms, last)}#~"


def queue_notice_sk(notice_id: str) -> str:
    """A notice about the queue itself, in its partition, until it is sent (the outbox entry's id)."""
    return QUEUE_NOTICE_PREFIX + notice_id


def order_sk(flow_key: str) -> str:
    """The order item of one flow key of an ordered queue (v1.3); the length first, as `pace_window_prefix`."""
    return f"{ORDER_PREFIX}{len(flow_key)}:{flow_key}"


def order_overflow_prefix(flow_key: str) -> str:
    """`begins_with` prefix of a key's overflow items (a Query on it returns them in due order); no other key's
    items start with it, as the key's length is in it."""
    return f"{order_sk(flow_key)}#w#"


def order_waiter_prefix(flow_key: str, due_ms: int, created_ms: int, message_id: str) -> str:
    """`begins_with` prefix of one waiter's overflow items (normally one)."""
    return f"{order_overflow_prefix(flow_key)}{due_ms:013d}#{created_ms:013d}#{message_id}#"


def order_overflow_sk(flow_key: str, due_ms: int, created_ms: int, message_id: str, ref: str) -> str:
    """One overflow item of a key: a waiter beyond the key item's inline ones; `ref` names this placement, so a
    waiter placed again (moved inline and out again) is another item, which a delete of the first leaves alone."""
    return order_waiter_prefix(flow_key, due_ms, created_ms, message_id) + ref


def split_order_sk(sk: str) -> tuple[str, str]:
    """(flow key, the rest) of an order item's sort key: the rest is "" for the key's item, else an overflow one's."""
    length, _, tail = sk[len(ORDER_PREFIX) :].partition(":")
    return tail[: int(length)], tail[int(length) :]
