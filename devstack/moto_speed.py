"""Keeps the embedded moto server fast where its cost grows with the data and the services' does not.

- SQS: moto 5.2 reads one attribute (`ContentBasedDeduplication` on send, `MessageRetentionPeriod` on
  receive) through `queue.attributes`, a dict whose `ApproximateNumberOf*` entries count every
  message in the queue: sends and receives slowed down as the timer queue filled (24 msgs/s at 2,000
  queued). The patch returns a mapping that computes only the attributes asked for. And every
  receive and delete walks every message of the queue, delayed ones included, with several calls
  and a clock read per message (25 deliveries/s with 40k timers waiting): the walks stay, the calls go.
- DynamoDB: every Query sorted the whole table (`Table.all_items`) before looking at the key
  condition, 10-17 s a query at 80k items. The patch hands the query only the items its partition
  key selects (the table's partition, or the index entries with that key), which it then sorts and
  filters as before. A table query is handed only the items its range condition selects after its
  ExclusiveStartKey, at most the Limit + 1 its walk looks at, from a sorted copy of the partition
  (`devstack.moto_scale`): paging through a 100k-item partition sorted and walked all of it
  (DynamoType comparisons) for every page, 0.5-1 s a page; listing a 380k-item queue took 5 s.
- DynamoDB responses: moto's serializer walks every attribute of every item returned through its
  shape model with an attribute picker (~80% of a 200-item Query's time, ~1 ms per item). An item
  whose attributes are all plain (S, N, BOOL, NULL, SS, NS) is already in its wire form: it is
  copied as is. Binary, map and list attributes still go through the serializer. A table's items sort by
  native values instead of DynamoType comparisons (the same order: a table's key types are fixed).
- DynamoDB items: moto's attribute dict re-adds the sizes of all the item's attributes for each one
  it stores (two thirds of a PutItem's time with 25 attributes). An item is built with its size
  checked once, against the same limit: the sizes only add up, so it fails exactly when moto's would.
  And moto keeps every item it ever builds in a list for its dashboard (`instances_tracked`): every
  put, and the copy of every item a query, scan or update returns, stayed in memory for good.
- Index queries, Scan pages and transactions at any table size: `devstack.moto_scale`.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from moto.core.serialize import BaseJSONSerializer
from moto.core.utils import camelcase_to_underscores, unix_time_millis
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.sqs import models

from devstack import moto_scale
from devstack.moto_atomic import TABLE_LOCK

QUERY = inspect.signature(Table.query)


def _names(queue: Any) -> list[str]:
    """The attribute names moto's `Queue.attributes` would hold, in its order."""
    names = list(queue.BASE_ATTRIBUTES)
    if queue.fifo_queue:
        names += queue.FIFO_ATTRIBUTES
    if queue.kms_master_key_id:
        names += queue.KMS_ATTRIBUTES
    if queue.policy:
        names.append("Policy")
    if queue.redrive_policy:
        names.append("RedrivePolicy")
    return names


def _value(queue: Any, name: str) -> Any:
    if name == "Policy":
        return queue.policy
    if name == "RedrivePolicy":
        return json.dumps(queue.redrive_policy)
    value = getattr(queue, camelcase_to_underscores(name))
    return str(value).lower() if isinstance(value, bool) else value


class QueueAttributes(Mapping[str, Any]):
    """moto's attribute dict, each value computed when read."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self._names = _names(queue)

    def __getitem__(self, key: str) -> Any:
        if key not in self._names:
            raise KeyError(key)
        return _value(self._queue, key)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _attributes(queue: Any) -> QueueAttributes:
    return QueueAttributes(queue)


def _visible_messages(queue: Any) -> list[Any]:
    """moto's `Queue.messages` (visible and no longer delayed), with one clock read."""
    now = unix_time_millis()
    return [m for m in queue._messages if now > m.visible_at and now >= m.delayed_until]


def _delete_message(queue: Any, receipt_handle: str) -> None:
    """moto's `Queue.delete_message`: the same checks and effects, one cheap pass to find the message."""
    if receipt_handle in queue.deleted_messages:
        return
    matched = [
        m for m in queue._messages if m.receipt_handle == receipt_handle or receipt_handle in m._old_receipt_handles
    ]
    if not matched:
        raise models.ReceiptHandleIsInvalid()
    for message in matched:
        queue.pending_messages.discard(message)
        queue.deleted_messages.update(message.all_receipt_handles)
    gone = {id(m) for m in matched}
    queue._messages = [m for m in queue._messages if id(m) not in gone]


def _partition(table: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
    """The items a Query's key condition selects; None when the query is not one this can narrow."""
    call = QUERY.bind(table, *args, **kwargs).arguments
    if call.get("index_name"):
        conditions = call.get("hash_key_conditions") or []
        return moto_scale.indexed(table, conditions) if conditions else None
    hash_key = call["hash_key"]
    if hash_key is None:
        return None
    if not table.range_key_attr:
        group = table.items.get(hash_key)
        return [] if group is None else [group]
    # A legacy QueryFilter decides what counts toward the limit: then no cut at limit + 1.
    limit = None if call.get("filter_kwargs") else call.get("limit")
    return moto_scale.partition_window(
        table,
        hash_key,
        (call.get("range_comparison"), call.get("range_objs") or []),
        call.get("exclusive_start_key"),
        call.get("scan_index_forward", True),
        limit,
    )


def _all_items(table: Any) -> list[Any]:
    """moto's `Table.all_items`: every item in (hash key, range key) order."""
    if not table.range_key_attr:
        return sorted(moto_scale.every_item(table), key=lambda item: item.hash_key.cast_value)
    return sorted(moto_scale.every_item(table), key=lambda item: (item.hash_key.cast_value, item.range_key.cast_value))


def _narrowed(query: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(query)
    def narrowed(table: Any, *args: Any, **kwargs: Any) -> Any:
        with TABLE_LOCK:  # all_items is swapped on the instance for this one call
            items = _partition(table, args, kwargs)
            if items is None:
                return query(table, *args, **kwargs)
            with moto_scale.answering(table, items):
                return query(table, *args, **kwargs)

    narrowed.__dict__["narrowed"] = True
    return narrowed


ITEM_SIZE_LIMIT = 405000  # moto's LimitedSizeDict limit (DynamoDB's 400 KB, as moto measures it)


def _item_init(item: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
    """moto's `Item.__init__`, with the item's size summed once instead of once per attribute."""
    item.hash_key = hash_key
    item.range_key = range_key
    converted = {key: DynamoType(value) for key, value in attrs.items()}
    if sum(bytesize(key) + value.size() for key, value in converted.items()) > ITEM_SIZE_LIMIT:
        raise ItemSizeTooLarge
    item.attrs = LimitedSizeDict()
    dict.update(item.attrs, converted)  # a plain update: LimitedSizeDict's per-key check is the cost avoided


def _untracked(cls: type, *args: Any, **kwargs: Any) -> Any:
    """`Item.__new__` without moto's BaseModel bookkeeping (a dashboard list no Hourglass run reads)."""
    return object.__new__(cls)


PLAIN_TYPES = frozenset({"S", "N", "BOOL", "NULL"})
PLAIN_SETS = frozenset({"SS", "NS"})


def _plain(value: Any) -> bool:
    """Whether an AttributeValue needs no serializing: one scalar or string-set member, already wire form."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind in PLAIN_TYPES:
        return isinstance(inner, str | bool)
    return kind in PLAIN_SETS and isinstance(inner, list) and all(isinstance(v, str) for v in inner)


def _attribute_maps_as_is(serialize_map: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(serialize_map)
    def serialize(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        attributes = getattr(shape.value, "name", None) == "AttributeValue" and isinstance(value, dict)
        if attributes and all(_plain(v) for v in value.values()):
            self._default_serialize(serialized, {k: dict(v) for k, v in value.items()}, shape, key)
            return
        serialize_map(self, serialized, value, shape, key)

    serialize.__dict__["as_is"] = True
    return serialize


def install() -> None:
    """Idempotent: the patches are applied once per process."""
    moto_scale.install()
    current: Any = models.Queue.__dict__["attributes"]
    if current.fget is not _attributes:
        queue: Any = models.Queue
        queue.attributes = property(_attributes)
        queue.messages = property(_visible_messages)
        queue.delete_message = _delete_message
    serializer: Any = BaseJSONSerializer
    if not getattr(serializer._serialize_type_map, "as_is", False):
        serializer._serialize_type_map = _attribute_maps_as_is(serializer._serialize_type_map)
    item: Any = Item
    item.__init__ = _item_init
    item.__new__ = staticmethod(_untracked)
    table: Any = Table
    if not getattr(table.query, "narrowed", False):
        table.query = _narrowed(table.query)
        table.all_items = _all_items
