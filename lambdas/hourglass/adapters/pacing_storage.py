"""A rate-limited queue's pacing item `<queue>` / `#pace` (and each flow key's, `#pace#k#<key>`, and with flow keys
each window's of the queue's slots, `#pace#w#<width>#<index>`): its next free start slot, moved by conditional
writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hourglass.adapters.items import n, s
from hourglass.adapters.table import Table, code_of
from hourglass.core.keys import PACE_SK, pace_sk, pace_window_prefix
from hourglass.core.pacing import PaceState
from hourglass.errors import StoreError

# A flow key's pacing item outlives its last slot by this much, then DynamoDB's TTL removes it: an idle key
# costs nothing, and one back after that starts afresh (its last start is long past, so the bound holds).
KEY_IDLE_TTL_S = 3600
# An item's size in write units is rounded up to 1 KB; the record keeps a pacing item within one.
ITEM_BYTES = 1024
# "pk", "sk", "next_us" and a number, "expire_at" and a number, "held": names and values at their largest.
OTHER_ATTRIBUTES_BYTES = 2 + 2 + 7 + 21 + 9 + 21 + 4 + 8


@dataclass(frozen=True)
class _HeldChange:
    """A record's change from `expected` to `new` as parts of an UpdateItem: its condition, its SET clause or
    REMOVE (neither when unchanged) and their values. The one place the record's writes are spelled out."""

    condition: str
    set: str | None
    remove: str | None
    values: dict[str, Any]


def _held_change(expected: str | None, new: str | None) -> _HeldChange:
    condition = "attribute_not_exists(held)" if expected is None else "held = :oheld"
    values = {} if expected is None else {":oheld": s(expected)}
    if new == expected:
        return _HeldChange(condition, None, None, values)
    if new is None:
        return _HeldChange(condition, None, "REMOVE held", values)
    return _HeldChange(condition, "held = :nheld", None, values | {":nheld": s(new)})


def _state(item: dict[str, Any] | None) -> PaceState:
    if not item:
        return PaceState()
    next_us = int(item["next_us"]["N"]) if "next_us" in item else None
    return PaceState(next_us, item["held"]["S"] if "held" in item else None)


class PacingStorage(Table):
    def advance_pace(
        self,
        queue: str,
        expected_us: int | None,
        new_us: int,
        flow_key: str | None = None,
        window: tuple[int, int] | None = None,
    ) -> tuple[bool, int | None]:
        """`next_us` = `new_us` if it is still `expected_us` (None: never written). Returns (True, new_us)
        when written, else (False, the value that won), read from the failed write itself (or consistently).
        `flow_key` / `window`: the item of that key or window (with a TTL) instead of the queue's."""
        written, state = self._advance(queue, pace_sk(flow_key, window), expected_us, new_us, None)
        return written, state.next_us

    def advance_held(
        self, queue: str, flow_key: str | None, expected: PaceState, new_us: int, new_held: str | None
    ) -> tuple[bool, PaceState]:
        """`advance_pace` of a queue's or a flow key's item that also sets its record of who holds its slots
        (`core.holders`), if both are still as `expected`. Returns whether it was written and what the item holds."""
        return self._advance(queue, pace_sk(flow_key), expected.next_us, new_us, (expected.held, new_held))

    def _advance(
        self,
        queue: str,
        sk: str,
        expected_us: int | None,
        new_us: int,
        held: tuple[str | None, str | None] | None,
    ) -> tuple[bool, PaceState]:
        condition = "attribute_not_exists(next_us)" if expected_us is None else "next_us = :old"
        values = {":new": n(new_us)} | ({} if expected_us is None else {":old": n(expected_us)})
        update = "SET next_us = :new"
        if sk != PACE_SK:
            update += ", expire_at = :ttl"
            values[":ttl"] = n(new_us // 1_000_000 + KEY_IDLE_TTL_S)
        removed = ""
        if held is not None:
            change = _held_change(*held)
            condition += f" AND {change.condition}"
            values |= change.values
            update += f", {change.set}" if change.set else ""
            removed = f" {change.remove}" if change.remove else ""
        key = {"pk": s(queue), "sk": s(sk)}
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=update + removed,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if code_of(exc) != "ConditionalCheckFailedException":
                raise StoreError(f"DynamoDB update_item failed: {exc}") from exc
            item = exc.response.get("Item")
            if item is None:
                item = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            return False, _state(item)
        return True, PaceState(new_us, held[1] if held is not None else None)

    def pace_state(self, queue: str, flow_key: str | None) -> PaceState:
        """A queue's or flow key's pacing item as it is now (read consistently, after a lost give-way)."""
        key = {"pk": s(queue), "sk": s(pace_sk(flow_key))}
        return _state(self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True).get("Item"))

    def held_fence(self, queue: str, flow_key: str | None, expected: str | None, new: str | None) -> dict[str, Any]:
        """The record's change as one action of a transaction (`Update`), conditional on it being `expected`
        (a changed record: the caller gives no fence for an unchanged one)."""
        change = _held_change(expected, new)
        fence: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"pk": s(queue), "sk": s(pace_sk(flow_key))},
            "UpdateExpression": f"SET {change.set}" if change.set else change.remove,
            "ConditionExpression": change.condition,
        }
        return fence | ({"ExpressionAttributeValues": change.values} if change.values else {})

    def held_room(self, queue: str, flow_key: str | None) -> int:
        """How long the record's text may be for its item to stay within one write unit (1 KB): the other
        attributes' names and values, at their largest, taken off."""
        return ITEM_BYTES - len(queue.encode()) - len(pace_sk(flow_key).encode()) - OTHER_ATTRIBUTES_BYTES

    def pace_windows(self, queue: str, width_us: int, first: int, count: int) -> dict[int, int]:
        """The `next_us` of the used windows among `first` .. `first + count - 1` (one Query of small items; an
        eventually consistent one: a stale value costs the allocator a lost round, never the bound)."""
        bounds = [s(pace_sk(window=(width_us, index))) for index in (first, first + count - 1)]
        values = {":q": s(queue), ":lo": bounds[0], ":hi": bounds[1]}
        key = "pk = :q AND sk BETWEEN :lo AND :hi"
        got = self._guard("query", TableName=self.table, KeyConditionExpression=key, ExpressionAttributeValues=values)
        return {int(item["sk"]["S"].rsplit("#", 1)[1]): int(item["next_us"]["N"]) for item in got.get("Items", [])}

    def pace_cursor(self, queue: str) -> int | None:
        """The queue's `#pace` next free slot (None: unused); read consistently, once per PUT that moves its slots."""
        key = {"pk": s(queue), "sk": s(PACE_SK)}
        item = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        return int(item["next_us"]["N"]) if item and "next_us" in item else None

    def last_window(self, queue: str, width_us: int) -> int | None:
        """The next free slot of the queue's furthest window of this width (None: none used): one Query, newest
        first (the zero-padded index sorts windows in time order)."""
        got = self._guard(
            "query",
            TableName=self.table,
            KeyConditionExpression="pk = :q AND begins_with(sk, :p)",
            ExpressionAttributeValues={":q": s(queue), ":p": s(pace_window_prefix(width_us))},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items", [])
        return int(items[0]["next_us"]["N"]) if items else None

    def reset_pace(self, queue: str) -> None:
        """Forget the queue's own slots, its `#pace` cursor and every window: the next allocation starts from now
        (its keys' items stay; they expire)."""
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":q": s(queue), ":p": s(pace_window_prefix())},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        windows = [item for page in self._pages(request) for item in page.get("Items", [])]
        keys = [{"pk": s(queue), "sk": s(PACE_SK)}, *({"pk": w["pk"], "sk": w["sk"]} for w in windows)]
        self._batch_write([{"DeleteRequest": {"Key": key}} for key in keys])
