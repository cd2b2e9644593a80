"""The order items of an ordered queue's keys (v1.3): `<queue>` / `#order#<len>:<key>`, read strongly consistently
and written only on the version read, so two writers never both change one key; an idle key's item is deleted.
A long line's later waiters are overflow items, `#order#<len>:<key>#w#<due>#<created>#<id>#<ref>`, in due order."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

from hourglass.adapters.items import Item, checked, fv, n, s
from hourglass.adapters.table import Table
from hourglass.core.keys import (
    ORDER_PREFIX,
    order_overflow_prefix,
    order_overflow_sk,
    order_sk,
    order_waiter_prefix,
    split_order_sk,
)
from hourglass.core.ordering import KeyState, Spilled, Waiter
from hourglass.errors import StaleVersionError


class OrderingStorage(Table):
    def key_order(self, queue: str, flow_key: str) -> KeyState:
        got = self._guard("get_item", TableName=self.table, Key=_key(queue, flow_key), ConsistentRead=True).get("Item")
        return KeyState() if got is None else _state(got)

    def key_orders(self, queue: str) -> list[tuple[str, KeyState]]:
        """Every key of the queue that is not idle, with its state."""
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :o)",
            "ExpressionAttributeValues": {":q": s(queue), ":o": s(ORDER_PREFIX)},
            "ConsistentRead": True,
        }
        found = []
        for page in self._pages(request):
            for item in page.get("Items", []):
                flow_key, rest = split_order_sk(item["sk"]["S"])
                if not rest:
                    found.append((flow_key, _state(item)))
        return found

    def overflow(self, queue: str, flow_key: str, limit: int | None = None) -> tuple[list[Spilled], bool]:
        """The key's overflow items in due order, the first `limit` (None: all), strongly consistent; and whether
        they are all there are."""
        return self._spilled(queue, flow_key, order_overflow_prefix(flow_key), limit)

    def overflowed(self, queue: str, flow_key: str, waiter: Waiter) -> list[Spilled]:
        """One waiter's overflow items (none, or normally one)."""
        prefix = order_waiter_prefix(flow_key, waiter.due_ms, waiter.created_ms, waiter.id)
        return self._spilled(queue, flow_key, prefix, None)[0]

    def spill(self, queue: str, flow_key: str, waiters: Iterable[Waiter]) -> list[Spilled]:
        """Puts an overflow item for each waiter, each a new placement."""
        placed = [Spilled(w, secrets.token_hex(4)) for w in waiters]
        self._batch_write([{"PutRequest": {"Item": _overflow_key(queue, flow_key, e) | fv("order")}} for e in placed])
        return placed

    def unspill(self, queue: str, flow_key: str, entries: Iterable[Spilled]) -> None:
        """Deletes these overflow items (only these placements: a waiter placed again since keeps its item)."""
        self._batch_write([{"DeleteRequest": {"Key": _overflow_key(queue, flow_key, e)}} for e in set(entries)])

    def _spilled(self, queue: str, flow_key: str, prefix: str, limit: int | None) -> tuple[list[Spilled], bool]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :o)",
            "ExpressionAttributeValues": {":q": s(queue), ":o": s(prefix)},
            "ProjectionExpression": "sk, fv",
            "ConsistentRead": True,
        }
        if limit is not None:
            request["Limit"] = limit + 1
        found: list[Spilled] = []
        head = len(order_overflow_prefix(flow_key))
        for page in self._pages(request):
            for item in page.get("Items", []):
                checked("order", item)
                due_ms, created_ms, message_id, ref = item["sk"]["S"][head:].split("#")
                found.append(Spilled(Waiter(int(due_ms), int(created_ms), message_id), ref))
            if limit is not None and len(found) > limit:
                return found[:limit], False
        return found, True

    def save_key_order(self, queue: str, flow_key: str, state: KeyState, read: KeyState) -> bool:
        """Writes `state` over the key's item as `read` (its version); False, nothing written, when another
        writer changed it since. An idle key's item is deleted."""
        condition = "attribute_not_exists(version)" if read.version == 0 else "version = :v"
        values = {} if read.version == 0 else {":v": n(read.version)}
        try:
            if state.idle:
                if read.version == 0:
                    return True
                self._conditional(
                    "delete_item",
                    f"key {flow_key!r} of {queue} changed",
                    TableName=self.table,
                    Key=_key(queue, flow_key),
                    ConditionExpression=condition,
                    ExpressionAttributeValues=values,
                )
                return True
            item = key_item(queue, flow_key, state, read.version + 1)
            request: dict[str, Any] = {"TableName": self.table, "Item": item, "ConditionExpression": condition}
            if values:
                request["ExpressionAttributeValues"] = values
            self._conditional("put_item", f"key {flow_key!r} of {queue} changed", **request)
        except StaleVersionError:
            return False
        return True


def key_item(queue: str, flow_key: str, state: KeyState, version: int) -> Item:
    """The key's item at `version`: under 1 KB with its INLINE waiters (`tests/unit/test_ordering_overflow.py`)."""
    item: Item = {**_key(queue, flow_key), "version": n(version), "held": {"BOOL": state.held}, **fv("order")}
    if state.overflow:
        item["overflow"] = {"BOOL": True}
    if state.head is not None:
        item["head"] = s(state.head)
    if state.waiting:
        item["waiting"] = {"M": {w.id: s(w.encode()) for w in state.waiting}}
    return item


def _key(queue: str, flow_key: str) -> Item:
    return {"pk": s(queue), "sk": s(order_sk(flow_key))}


def _overflow_key(queue: str, flow_key: str, entry: Spilled) -> Item:
    w = entry.waiter
    return {"pk": s(queue), "sk": s(order_overflow_sk(flow_key, w.due_ms, w.created_ms, w.id, entry.ref))}


def _state(item: Item) -> KeyState:
    checked("order", item)
    waiting = []
    for message_id, value in item.get("waiting", {}).get("M", {}).items():
        due_ms, _, created_ms = value["S"].partition("#")
        waiting.append(Waiter(int(due_ms), int(created_ms), message_id))
    head = item.get("head", {}).get("S")
    held, overflow = (bool(item.get(name, {}).get("BOOL")) for name in ("held", "overflow"))
    return KeyState(head, held, tuple(sorted(waiting)), int(item["version"]["N"]), overflow)
