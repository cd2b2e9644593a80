"""DynamoDB capacity units of the requests the Store makes, by DynamoDB's published rules.

moto answers every request with a fixed ConsumedCapacity, so the units are computed here from the
requests themselves (the Store's `meter` hook sees each one), with a shadow copy of every item
written so that sizes before and after each write are known. The rules:

- Item size: the sum over attributes of the name's UTF-8 length plus the value's size. A string is
  its UTF-8 length; a number about one byte per two significant digits plus one; binary its length;
  a boolean or null one byte; a list or map 3 bytes plus its elements, each plus one byte.
- Writes (PutItem, UpdateItem, DeleteItem, each entry of BatchWriteItem): 1 write unit per started
  KB of the larger of the item before and after. A write whose condition fails still consumes the
  units of the item's size (at least 1) and writes no index.
- Global secondary index: a write that puts an item into the index, or takes it out, costs the
  index entry's size in write units (at least 1); one that changes the index key costs 2 (delete and
  put); one that only changes a projected attribute costs 1; anything else leaves the index alone.
- TransactWriteItems: twice the units of the same writes done one by one.
- Reads: 1 read unit per started 4 KB for a strongly consistent read, half for an eventually
  consistent one (GSI queries always are). GetItem and BatchGetItem count each item (a missing one
  costs the minimum); Query counts the total size of the items it read, rounded up once per request.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hourglass import contract
from hourglass.adapters.items import item_size
from hourglass.core.keys import (
    BODY_PREFIX,
    BREAKER_PREFIX,
    BUCKETS_PK,
    COUNT_PREFIX,
    MESSAGE_PREFIX,
    ORDER_PREFIX,
    PACE_SK,
    QUEUE_SK,
    REPAIR_PK,
    SCHEDULE_PREFIX,
    SCHEDULES_PK,
    SLOT_PREFIX,
    SWEEPER_PK,
    message_sk,
)

Item = dict[str, dict[str, Any]]
Key = tuple[str, str]
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
QUERY_PAGE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Index:
    name: str
    hash_key: str
    range_key: str
    projected: tuple[str, ...]


@dataclass
class Units:
    write: float = 0.0
    read: float = 0.0
    requests: int = 0

    def add(self, write: float = 0.0, read: float = 0.0) -> None:
        self.write += write
        self.read += read
        self.requests += 1


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


class CapacityMeter:
    """A Store `meter`: keeps the shadow table and adds up units per message item and per shared use."""

    def __init__(self, table: str, indexes: list[Index]) -> None:
        self.table = table
        self.indexes = indexes
        self.items: dict[Key, Item] = {}
        self.by_key: dict[Key, Units] = defaultdict(Units)
        self.by_use: dict[str, Units] = defaultdict(Units)
        # What each message item went through, to explain an item that cost more than its path's base.
        self.trail: dict[Key, list[str]] = defaultdict(list)
        self.indexed_at_ingest: dict[Key, bool] = {}
        self.operations: dict[str, int] = defaultdict(int)
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, operation: str, kwargs: dict[str, Any]) -> None:
        """Never raises: a request the rules here cannot price is recorded in `errors` (the bench fails on it)."""
        with self._lock:
            self.operations[operation] += 1
            try:
                getattr(self, "_" + operation)(kwargs)
            except Exception as exc:
                self.errors.append(f"{operation}: {type(exc).__name__}: {exc}")

    # writes -------------------------------------------------------------------------------------
    def _put_item(self, kwargs: dict[str, Any], factor: int = 1) -> None:
        item = kwargs["Item"]
        self._write(_key(item), item if not kwargs.get("_failed") else None, kwargs.get("_failed", False), factor)

    def _update_item(self, kwargs: dict[str, Any], factor: int = 1) -> None:
        key = _key(kwargs["Key"])
        failed = kwargs.get("_failed", False)
        after = None if failed else apply_update(self.items.get(key) or dict(kwargs["Key"]), kwargs)
        self._write(key, after, failed, factor)

    def _delete_item(self, kwargs: dict[str, Any], factor: int = 1) -> None:
        key = _key(kwargs["Key"])
        failed = kwargs.get("_failed", False)
        self._write(key, {}, failed, factor)

    def _batch_write_item(self, kwargs: dict[str, Any]) -> None:
        for request in kwargs["RequestItems"].get(self.table, []):
            if "PutRequest" in request:
                item = request["PutRequest"]["Item"]
                self.indexed_at_ingest.setdefault(_key(item), self._indexed(item))
                self._write(_key(item), item, False, 1)
            else:
                self._write(_key(request["DeleteRequest"]["Key"]), {}, False, 1)

    def _transact_write_items(self, kwargs: dict[str, Any]) -> None:
        failed = kwargs.get("_failed", False)
        for entry in kwargs["TransactItems"]:
            ((kind, body),) = entry.items()
            if kind == "Put":
                self.indexed_at_ingest.setdefault(_key(body["Item"]), self._indexed(body["Item"]))
            op = {"Put": self._put_item, "Update": self._update_item, "Delete": self._delete_item}.get(kind)
            if op is not None:
                op({**body, "_failed": failed}, factor=2)

    def _write(self, key: Key, after: Item | None, failed: bool, factor: int) -> None:
        before = self.items.get(key)
        if key[1].startswith(MESSAGE_PREFIX):
            status = (after or {}).get("status", {}).get("S", "")
            self.trail[key].append("failed write" if failed else f"write {status}".strip())
        if failed or after is None:
            self._charge(key, write=factor * write_units(item_size(before)))
            return
        table = write_units(max(item_size(before), item_size(after)))
        index = sum(self._index_writes(index, before, after) for index in self.indexes)
        self._charge(key, write=factor * (table + index))
        if after:
            self.items[key] = after
        else:
            self.items.pop(key, None)

    def _index_writes(self, index: Index, before: Item | None, after: Item) -> int:
        old, new = self._entry(index, before), self._entry(index, after)
        if old is None and new is None:
            return 0
        if old is None or new is None:
            return write_units(item_size(old if new is None else new))
        if (old[index.hash_key], old[index.range_key]) != (new[index.hash_key], new[index.range_key]):
            return write_units(item_size(old)) + write_units(item_size(new))
        return write_units(item_size(new)) if old != new else 0

    def _entry(self, index: Index, item: Item | None) -> Item | None:
        if not item or index.hash_key not in item or index.range_key not in item:
            return None
        names = ("pk", "sk", index.hash_key, index.range_key, *index.projected)
        return {name: item[name] for name in names if name in item}

    def _indexed(self, item: Item) -> bool:
        """Whether the item waits in the due index (the sweep path); the list indexes hold every message."""
        due = [index for index in self.indexes if index.name == contract.DUE_INDEX]
        return any(self._entry(index, item) is not None for index in due)

    # reads --------------------------------------------------------------------------------------
    def _get_item(self, kwargs: dict[str, Any]) -> None:
        key = _key(kwargs["Key"])
        consistent = bool(kwargs.get("ConsistentRead"))
        self._charge(key, read=read_units(item_size(self.items.get(key)), consistent=consistent))

    def _batch_get_item(self, kwargs: dict[str, Any]) -> None:
        request = kwargs["RequestItems"].get(self.table, {})
        for raw in request.get("Keys", []):
            self._get_item({"Key": raw, "ConsistentRead": request.get("ConsistentRead", False)})

    def _query(self, kwargs: dict[str, Any]) -> None:
        read = self._emulate_query(kwargs)
        units = read_units(sum(item_size(i) for i in read), consistent=bool(kwargs.get("ConsistentRead")))
        index = kwargs.get("IndexName")
        partition = _condition_values(kwargs)[0]
        use = f"query {index}" if index else ("sweeper state" if partition == SWEEPER_PK else "query table")
        if partition == SCHEDULES_PK or _sort_values(kwargs, SCHEDULE_PREFIX):
            use = "schedule items"  # the chain repair's round: the due index's schedule entries, then the items
        if _sort_values(kwargs, BREAKER_PREFIX):
            use = "circuit breaker"
        self.by_use[use].add(read=units)

    def _scan(self, kwargs: dict[str, Any]) -> None:
        """A Scan (the first sweep's look at the sparse due index): every entry it holds, in read units."""
        index = next((i for i in self.indexes if i.name == kwargs.get("IndexName")), None)
        entries = [self._entry(index, item) if index else item for item in self.items.values()]
        size = sum(item_size(e) for e in entries if e)
        self.by_use[f"scan {index.name}" if index else "scan table"].add(read=read_units(size, consistent=False))

    def _emulate_query(self, kwargs: dict[str, Any]) -> list[Item]:
        """The items a Query read, found in the shadow table: key condition, start key, Limit, 1 MB."""
        index = next((i for i in self.indexes if i.name == kwargs.get("IndexName")), None)
        hash_name, range_name = (index.hash_key, index.range_key) if index else ("pk", "sk")
        partition, test = _condition_values(kwargs)
        rows = []
        for item in self.items.values():
            entry = self._entry(index, item) if index else item
            if entry and entry.get(hash_name, {}).get("S") == partition and test(entry.get(range_name, {}).get("S")):
                rows.append(entry)
        rows.sort(key=lambda e: (e[range_name]["S"], e["pk"]["S"], e["sk"]["S"]))
        start = kwargs.get("ExclusiveStartKey")
        if start:
            after = (start[range_name]["S"], start["pk"]["S"], start["sk"]["S"])
            rows = [e for e in rows if (e[range_name]["S"], e["pk"]["S"], e["sk"]["S"]) > after]
        limit = kwargs.get("Limit") or len(rows)
        read, size = [], 0
        for entry in rows[:limit]:
            size += item_size(entry)
            read.append(entry)
            if size >= QUERY_PAGE_BYTES:
                break
        return read

    # accounting ---------------------------------------------------------------------------------
    def _charge(self, key: Key, write: float = 0.0, read: float = 0.0) -> None:
        if key[1].startswith(BODY_PREFIX):
            # A body item (b#<id>#<version>) is part of its message's cost.
            key = (key[0], message_sk(key[1].removeprefix(BODY_PREFIX).rpartition("#")[0]))
        if key[1].startswith(MESSAGE_PREFIX):
            self.by_key[key].add(write, read)
        else:
            shared = {SWEEPER_PK: "sweeper state", BUCKETS_PK: "due-bucket records", REPAIR_PK: "schedule items"}
            use = shared.get(key[0]) or _use_of(key[1])
            self.by_use[use].add(write, read)

    def snapshot(self) -> tuple[dict[Key, Units], dict[str, Units]]:
        with self._lock:
            keys = {k: Units(u.write, u.read, u.requests) for k, u in self.by_key.items()}
            uses = {k: Units(u.write, u.read, u.requests) for k, u in self.by_use.items()}
        return keys, uses


def _use_of(sort_key: str) -> str:
    """A queue partition's shared items: its settings, its pacing item, its concurrency slots, its schedules."""
    if sort_key == QUEUE_SK:
        return "queue settings"
    if sort_key.startswith(PACE_SK):  # the queue's, and each flow key's (`#pace#k#<key>`)
        return "pacing"
    if sort_key.startswith(SLOT_PREFIX):
        return "concurrency slots"
    if sort_key.startswith(COUNT_PREFIX):
        return "status counters"
    if sort_key.startswith(BREAKER_PREFIX):
        return "circuit breaker"
    if sort_key.startswith(ORDER_PREFIX):  # an ordered queue's keys (v1.3)
        return "key order"
    return "schedule items" if sort_key.startswith(SCHEDULE_PREFIX) else "other"


def _sort_values(kwargs: Mapping[str, Any], prefix: str) -> bool:
    """Whether a Query's condition names a value that starts with `prefix` (the items of one kind it reads)."""
    return any(str(v.get("S", "")).startswith(prefix) for v in kwargs["ExpressionAttributeValues"].values())


def _key(item: Mapping[str, Any]) -> Key:
    return (str(item["pk"]["S"]), str(item["sk"]["S"]))


_SET = re.compile(r"^(#?\w+)\s*=\s*(?:if_not_exists\(\s*#?\w+\s*,\s*(:\w+)\s*\)(?:\s*\+\s*(:\w+))?|(:\w+))$")


def apply_update(before: Item, kwargs: Mapping[str, Any]) -> Item:
    """The item after an UpdateExpression of the forms the Store uses: SET a = :v, SET a = if_not_exists(a, :z) + :o,
    SET a = if_not_exists(a, :v), REMOVE a, b, ADD a :n (a number)."""
    names = kwargs.get("ExpressionAttributeNames") or {}
    values = kwargs.get("ExpressionAttributeValues") or {}
    item = dict(before)
    expression = kwargs["UpdateExpression"]
    for clause, body in re.findall(r"(SET|REMOVE|ADD)\s+(.*?)(?=\s+(?:SET|REMOVE|ADD)\s+|$)", expression):
        for part in (p.strip() for p in _top_level_split(body)):
            if clause == "REMOVE":
                item.pop(names.get(part, part), None)
                continue
            if clause == "ADD":
                name, value = part.split()
                attr = names.get(name, name)
                current = Decimal(item.get(attr, {"N": "0"})["N"])
                item[attr] = {"N": str(current + Decimal(values[value]["N"]))}
                continue
            match = _SET.match(part)
            if match is None:
                raise ValueError(f"unsupported update clause {part!r}")
            name, zero, one, value = (str(g) if g else "" for g in match.groups())
            attr = names.get(name, name)
            if value:
                item[attr] = values[value]
            elif not one:
                item[attr] = item.get(attr, values[zero])
            else:
                current = Decimal(item.get(attr, values[zero])["N"])
                item[attr] = {"N": str(current + Decimal(values[one]["N"]))}
    return item


def _top_level_split(text: str) -> list[str]:
    """Splits on the commas that are not inside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


_CONDITION = re.compile(
    r"^(#?\w+)\s*=\s*(:\w+)(?:\s+AND\s+(?:begins_with\(\s*#?\w+\s*,\s*(:\w+)\s*\)|#?\w+\s+BETWEEN\s+(:\w+)\s+AND\s+(:\w+)"
    r"|#?\w+\s*>\s*(:\w+)))?$"
)


def _condition_values(kwargs: Mapping[str, Any]) -> tuple[str, Any]:
    """The partition value and a test of the sort key, for the key conditions the Store uses (=, begins_with,
    BETWEEN, >)."""
    match = _CONDITION.match(kwargs["KeyConditionExpression"].strip())
    if match is None:
        raise ValueError(f"unsupported key condition {kwargs['KeyConditionExpression']!r}")
    values = kwargs["ExpressionAttributeValues"]
    partition: str = match.group(2)
    prefix, low, high, above = match.group(3), match.group(4), match.group(5), match.group(6)
    if above:
        after = values[above]["S"]
        return values[partition]["S"], lambda sk: sk is not None and sk > after
    if prefix:
        start = values[prefix]["S"]
        return values[partition]["S"], lambda sk: sk is not None and sk.startswith(start)
    if low:
        lo, hi = values[low]["S"], values[high]["S"]
        return values[partition]["S"], lambda sk: sk is not None and lo <= sk <= hi
    return values[partition]["S"], lambda sk: True


def indexes_of(description: Mapping[str, Any]) -> list[Index]:
    """The GSIs of a DescribeTable answer."""
    found = []
    for gsi in description.get("GlobalSecondaryIndexes", []):
        keys = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
        projected = tuple(gsi.get("Projection", {}).get("NonKeyAttributes", []))
        found.append(Index(gsi["IndexName"], keys["HASH"], keys.get("RANGE", ""), projected))
    return found
