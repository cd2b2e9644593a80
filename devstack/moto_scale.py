"""Keeps the embedded moto's DynamoDB costs per request independent of the table's size.

moto walks every item of a table for an index query, sorts a whole partition for every page of a
table query, walks and sorts the table for every page of a Scan, and deep-copies every table a
transaction touches (to roll back). With a million items (a bulk load) the sweep's index queries held
the table lock for seconds, listing a big queue took 5 s a page, a report's Scan took hours and a
deduplicated ingest minutes. Here an index query reads a map from index key to items kept current on
every write; table queries and Scan pages start at their ExclusiveStartKey in cached key orders (a
partition's kept in step with its puts and deletes); a transaction keeps a journal of the items it
touches instead of a copy. What each call returns is unchanged.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import inspect
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from devstack.moto_atomic import TABLE_LOCK

GROUPS = "_hourglass_groups"  # table.__dict__: {attribute: {value: {id(item): item}}}
ORDER = "_hourglass_order"  # table.__dict__: (version, {total segments: [(keys, items) per segment]})
# table.__dict__: {hash key: (range keys, items) in range-key order}, kept in step with puts and deletes
PARTITIONS = "_hourglass_partitions"
VERSION = "_hourglass_version"  # table.__dict__: bumped whenever an item is added, replaced or removed
_SHARED = threading.local()  # set while a journaled transaction runs: its tables are not copied

_UPDATE = inspect.signature(DynamoDBBackend.update_item)
_SCAN = inspect.signature(Table.scan)


# ------------------------------------------------------------------ index queries


def indexed(table: Any, conditions: Sequence[tuple[str, Any]]) -> list[Any] | None:
    """The items whose attributes match every (name, DynamoType) condition; None if they cannot be looked up."""
    name, want = conditions[0]
    groups = table.__dict__.setdefault(GROUPS, {})
    if name not in groups:
        groups[name] = _grouped(table, name)
    try:
        group = groups[name].get(want)
    except TypeError:  # an unhashable value (a set, list or map) is no index key
        return None
    if not group:
        return []
    found = []
    for key, item in list(group.items()):
        if not _current(table, item) or not _has(item, name, want):
            del group[key]  # replaced, deleted, or moved to another value since it was noted
        elif all(_has(item, attr, value) for attr, value in conditions[1:]):
            found.append(item)
    if not group:
        del groups[name][want]
    return found


def _has(item: Any, name: str, want: Any) -> bool:
    value = item.attrs.get(name)
    return value is not None and bool(value == want)


def _grouped(table: Any, name: str) -> dict[Any, dict[int, Any]]:
    by_value: dict[Any, dict[int, Any]] = {}
    for item in every_item(table):
        _add(by_value, item, name)
    return by_value


def _add(by_value: dict[Any, dict[int, Any]], item: Any, name: str) -> None:
    value = item.attrs.get(name)
    if value is None:
        return
    with contextlib.suppress(TypeError):  # an unhashable value is no index key
        by_value.setdefault(value, {})[id(item)] = item


def _note(table: Any, item: Any) -> None:
    """Files a written item under its current values of every grouped attribute."""
    for name, by_value in table.__dict__.get(GROUPS, {}).items():
        _add(by_value, item, name)


def _current(table: Any, item: Any) -> bool:
    stored = table.items.get(item.hash_key)  # .get: the defaultdict must not grow here
    if table.range_key_attr:
        return stored is not None and stored.get(item.range_key) is item
    return stored is item


def every_item(table: Any) -> Iterator[Any]:
    """A table's items, unordered: `table.items` maps hash keys to items, or to {range key: item}."""
    if not table.range_key_attr:
        return iter(table.items.values())
    return (item for group in table.items.values() for item in group.values())


# ------------------------------------------------------------------ table queries

# moto's names for a key condition's comparison; each selects one run of a partition's sorted range keys
_EQUAL, _BELOW, _AT_MOST, _ABOVE, _AT_LEAST = {"=", "EQ"}, {"<", "LT"}, {"<=", "LE"}, {">", "GT"}, {">=", "GE"}


def partition_window(
    table: Any,
    hash_key: Any,
    condition: tuple[str | None, list[Any]],
    start_key: dict[str, Any] | None,
    forward: bool,
    limit: int | None,
) -> list[Any]:
    """A table query's candidates in a partition of a table with a range key: the items its range
    condition selects, after (or, backwards, before) `start_key`, in range-key order, and when the
    condition is one moto's walk needs no more of, only the `limit` + 1 it can look at."""
    keys, items = _sorted_partition(table, hash_key)
    comparison, bounds = condition
    span = _span(keys, comparison, [b.cast_value for b in bounds])
    exact = span is not None
    low, high = span or (0, len(keys))
    if start_key and table.range_key_attr in start_key:
        start = DynamoType(start_key[table.range_key_attr]).cast_value
        if forward:
            low = max(low, bisect_right(keys, start, low, high))
        else:
            high = min(high, bisect_left(keys, start, low, high))
    if exact and limit:
        low, high = (low, min(high, low + limit + 1)) if forward else (max(low, high - limit - 1), high)
    return items[low:high]


def _span(keys: list[Any], comparison: str | None, values: list[Any]) -> tuple[int, int] | None:
    """The run of sorted `keys` a range condition selects; None when this cannot tell (moto's walk does)."""
    if not comparison:
        return 0, len(keys)
    try:
        if comparison == "BETWEEN" and len(values) == 2:
            return bisect_left(keys, values[0]), bisect_right(keys, values[1])
        if comparison == "BEGINS_WITH" and len(values) == 1 and isinstance(values[0], str):
            return _prefixed(keys, values[0])
        if len(values) != 1:
            return None
        (value,) = values
        for names, span in (
            (_EQUAL, lambda: (bisect_left(keys, value), bisect_right(keys, value))),
            (_BELOW, lambda: (0, bisect_left(keys, value))),
            (_AT_MOST, lambda: (0, bisect_right(keys, value))),
            (_ABOVE, lambda: (bisect_right(keys, value), len(keys))),
            (_AT_LEAST, lambda: (bisect_left(keys, value), len(keys))),
        ):
            if comparison in names:
                return span()
    except TypeError:  # a value of another type than the keys': moto's walk compares them itself
        return None
    return None


def _prefixed(keys: list[Any], prefix: str) -> tuple[int, int]:
    low = bisect_left(keys, prefix)
    high = low
    while high < len(keys) and isinstance(keys[high], str) and keys[high].startswith(prefix):
        high += 1
    return low, high


def _sorted_partition(table: Any, hash_key: Any) -> tuple[list[Any], list[Any]]:
    cached = table.__dict__.setdefault(PARTITIONS, {})
    if hash_key not in cached:
        group = table.items.get(hash_key) or {}
        ordered = sorted(((range_key.cast_value, item) for range_key, item in group.items()), key=lambda p: p[0])
        cached[hash_key] = ([key for key, _ in ordered], [item for _, item in ordered])
    found: tuple[list[Any], list[Any]] = cached[hash_key]
    return found


# ------------------------------------------------------------------ scans


def scan_window(table: Any, start_key: dict[str, Any] | None, segments: tuple[Any, Any]) -> Iterator[Any]:
    """A Scan page's candidates: the segment's items after `start_key`, in moto's (hash, range) order."""
    keys, items = _segment(table, segments)
    position = bisect_right(keys, _native_key(table, start_key)) if start_key else 0
    return (items[i] for i in range(position, len(items)))


def _segment(table: Any, segments: tuple[Any, Any]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    version = table.__dict__.get(VERSION, 0)
    cached_version, by_total = table.__dict__.get(ORDER, (None, {}))
    if cached_version != version:
        by_total = {}
        table.__dict__[ORDER] = (version, by_total)
    segment, total = segments if segments != (None, None) else (0, 1)
    if total not in by_total:
        by_total[total] = _split(table, total)
    return by_total[total][segment]


def _split(table: Any, total: int) -> list[tuple[list[tuple[Any, ...]], list[Any]]]:
    ordered = sorted((_item_key(item), item) for item in every_item(table))
    parts: list[tuple[list[tuple[Any, ...]], list[Any]]] = [([], []) for _ in range(total)]
    for key, item in ordered:
        # moto's Item.is_within_segment: the first byte of the hash key's md5
        keys, items = parts[hashlib.md5(item.hash_key.value.encode("utf8")).digest()[0] % total]
        keys.append(key)
        items.append(item)
    return parts


def _item_key(item: Any) -> tuple[Any, ...]:
    if item.range_key is None:
        return (item.hash_key.cast_value,)
    return (item.hash_key.cast_value, item.range_key.cast_value)


def _native_key(table: Any, key: dict[str, Any]) -> tuple[Any, ...]:
    hash_value = DynamoType(key[table.hash_key_attr]).cast_value
    if not table.range_key_attr:
        return (hash_value,)
    return (hash_value, DynamoType(key[table.range_key_attr]).cast_value)


@contextlib.contextmanager
def answering(table: Any, items: Iterable[Any]) -> Iterator[None]:
    """Within: the table's `all_items` (what moto's Query and Scan walk) answers `items`. Hold TABLE_LOCK."""
    table.all_items = lambda: items
    try:
        yield
    finally:
        del table.all_items


def _windowed(scan: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(scan)
    def windowed(table: Any, *args: Any, **kwargs: Any) -> Any:
        call = _SCAN.bind(table, *args, **kwargs).arguments
        if call.get("index_name"):
            return scan(table, *args, **kwargs)
        with TABLE_LOCK:  # all_items is swapped on the instance for this one call
            window = scan_window(table, call.get("exclusive_start_key"), call.get("segments", (None, None)))
            with answering(table, window):
                return scan(table, *args, **kwargs)

    windowed.__dict__["windowed"] = True
    return windowed


# ------------------------------------------------------------------ writes


def _bump(table: Any, hash_key: Any) -> None:
    """Partition `hash_key` changed in a way not followed here: its cached order, and the table's, are dropped."""
    table.__dict__[VERSION] = table.__dict__.get(VERSION, 0) + 1
    table.__dict__.get(PARTITIONS, {}).pop(hash_key, None)


def _changed(table: Any, item: Any) -> tuple[list[Any], list[Any]] | None:
    """`item` was put or deleted: the table's order is out of date; its partition's cached order, if any."""
    table.__dict__[VERSION] = table.__dict__.get(VERSION, 0) + 1
    if item.range_key is None:
        return None
    cached: tuple[list[Any], list[Any]] | None = table.__dict__.get(PARTITIONS, {}).get(item.hash_key)
    return cached


def _placed(table: Any, item: Any) -> None:
    """A put item takes its place in its partition's cached order: added, or replacing its predecessor."""
    cached = _changed(table, item)
    if cached is None:
        return
    keys, items = cached
    key = item.range_key.cast_value
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        items[at] = item
    else:
        keys.insert(at, key)
        items.insert(at, item)


def _removed(table: Any, item: Any) -> None:
    cached = _changed(table, item)
    if cached is None:
        return
    keys, items = cached
    at = bisect_left(keys, item.range_key.cast_value)
    if at < len(items) and items[at] is item:
        del keys[at], items[at]


def _noting_put(put: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(put)
    def noting(table: Any, *args: Any, **kwargs: Any) -> Any:
        with TABLE_LOCK:  # the caches change with the table, never between a query's reads
            item = put(table, *args, **kwargs)
            _placed(table, item)
            _note(table, item)
            return item

    noting.__dict__["noting"] = True
    return noting


def _noting_delete(delete: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(delete)
    def noting(table: Any, *args: Any, **kwargs: Any) -> Any:
        with TABLE_LOCK:
            item = delete(table, *args, **kwargs)
            if item is not None:
                _removed(table, item)
            return item

    return noting


def _noting_update(update: Callable[..., Any]) -> Callable[..., Any]:
    """An update changes its item in place: the item is filed again under its new values, even after a failure."""

    @functools.wraps(update)
    def noting(backend: Any, *args: Any, **kwargs: Any) -> Any:
        call = _UPDATE.bind(backend, *args, **kwargs).arguments
        try:
            return update(backend, *args, **kwargs)
        finally:
            table = backend.tables.get(call["table_name"])
            item = _stored(table, call["key"]) if table is not None else None
            if item is not None:
                _note(table, item)

    return noting


def _stored(table: Any, key: dict[str, Any]) -> Any:
    stored = table.items.get(DynamoType(key[table.hash_key_attr]))
    if not table.range_key_attr or stored is None:
        return stored
    return stored.get(DynamoType(key[table.range_key_attr]))


def _forgetting(statement: Callable[..., Any]) -> Callable[..., Any]:
    """PartiQL writes items outside the paths noted here: every table's groups and order are dropped."""

    @functools.wraps(statement)
    def forgetting(backend: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return statement(backend, *args, **kwargs)
        finally:
            for table in backend.tables.values():
                for cache in (GROUPS, PARTITIONS):
                    table.__dict__.pop(cache, None)
                _bump(table, None)

    return forgetting


# ------------------------------------------------------------------ transactions


def _journaled(transact: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(transact)
    def journaled(backend: Any, transact_items: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        with TABLE_LOCK:
            journal = _journal(backend, transact_items)
            if journal is None:
                return transact(backend, transact_items, *args, **kwargs)
            _SHARED.active = True
            try:
                return transact(backend, transact_items, *args, **kwargs)
            except BaseException:
                _restore(journal)
                raise
            finally:
                _SHARED.active = False

    journaled.__dict__["journaled"] = True
    return journaled


def _journal(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[Any, Any, Any, Any]] | None:
    """(table, hash key, range key, a copy of the item or None) for each item the transaction names, first
    mention only; None when a table streams its changes (rolled back by moto's own copy)."""
    journal: list[tuple[Any, Any, Any, Any]] = []
    seen: set[tuple[int, Any, Any]] = set()
    for entry in transact_items:
        _, operation = next(iter(entry.items()))
        table = backend.tables.get(operation.get("TableName"))
        if table is None:
            continue
        if table.stream_shard is not None:
            return None
        key = operation.get("Key") or operation.get("Item") or {}
        if table.hash_key_attr not in key or (table.range_key_attr and table.range_key_attr not in key):
            continue  # moto refuses it before writing anything
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        if (id(table), hash_key, range_key) in seen:
            continue
        seen.add((id(table), hash_key, range_key))
        journal.append((table, hash_key, range_key, copy.deepcopy(_stored(table, key))))
    return journal


def _restore(journal: list[tuple[Any, Any, Any, Any]]) -> None:
    for table, hash_key, range_key, before in reversed(journal):
        if range_key is None:
            table.items.pop(hash_key, None)
            if before is not None:
                table.items[hash_key] = before
        else:
            group = table.items.get(hash_key)
            if group is not None:
                group.pop(range_key, None)
            if before is not None:
                table.items[hash_key][range_key] = before
        _bump(table, hash_key)
        if before is not None:
            _note(table, before)


def _table_deepcopy(table: Any, memo: dict[int, Any]) -> Any:
    """A journaled transaction's rollback copy is the table itself; any other copy is a deep one."""
    if getattr(_SHARED, "active", False):
        return table
    kind: Any = type(table)
    copied = kind.__new__(kind)  # moto's BaseModel tracks every instance, copies too
    memo[id(table)] = copied
    for name, value in table.__dict__.items():
        copied.__dict__[name] = copy.deepcopy(value, memo)
    return copied


def install() -> None:
    """Idempotent: the methods are wrapped once per process."""
    table: Any = Table
    if getattr(table.put_item, "noting", False):
        return
    table.put_item = _noting_put(table.put_item)
    table.delete_item = _noting_delete(table.delete_item)
    table.scan = _windowed(table.scan)
    table.__deepcopy__ = _table_deepcopy
    backend: Any = DynamoDBBackend
    backend.update_item = _noting_update(backend.update_item)
    backend.transact_write_items = _journaled(backend.transact_write_items)
    for name in ("execute_statement", "execute_transaction", "batch_execute_statement"):
        setattr(backend, name, _forgetting(getattr(backend, name)))

