"""A rate-limited queue's pacing items: one per window of its own slots (`#pace#w#<width>#<index>`) and of each
flow key's (`#pace#k#<len>:<key>#w#<width>#<index>`), each with the slots taken in it and its record of who holds
them, changed by conditional writes; each expires an hour after its window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hourglass.adapters.items import KEEP_FV, checked, fv_value, n, s
from hourglass.adapters.table import Table, code_of
from hourglass.core.keys import PACE_SK, pace_sk, pace_window_prefix
from hourglass.core.pacing import Item, PaceState
from hourglass.errors import StoreError

# A pacing item outlives its last slot by this much, then DynamoDB's TTL removes it: an idle queue or key costs
# nothing, and a window is long past by then (so the bound holds).
KEY_IDLE_TTL_S = 3600
# An item's size in write units is rounded up to 1 KB; the record keeps a pacing item within one.
ITEM_BYTES = 1024
# "pk", "sk", "taken", "expire_at" and a number, "held", "fv" and its number: names and values at their largest
# (the list of slots taken is measured).
OTHER_ATTRIBUTES_BYTES = 2 + 2 + 5 + 9 + 21 + 4 + 2 + 2 + 8


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
    checked("pacing", item)
    taken = _decoded(item["taken"]["S"]) if "taken" in item else None
    return PaceState(taken, item["held"]["S"] if "held" in item else None)


def _encoded(taken: tuple[int, ...]) -> str:
    """The offsets of the slots taken (µs from the window's start, in order; a guard's is negative), each in base
    36 ("-" alone: none)."""
    return " ".join(_base36(offset) for offset in taken) or "-"


def _decoded(text: str) -> tuple[int, ...]:
    return tuple(int(part, 36) for part in text.split() if part != "-")


def _base36(number: int) -> str:
    if number < 0:
        return "-" + _base36(-number)
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if number == 0:
            return digits


class PacingStorage(Table):
    def advance_pace(
        self, queue: str, item: Item, expected: PaceState, taken: tuple[int, ...], new_held: str | None
    ) -> tuple[bool, PaceState]:
        """The slots `taken` and the record = `new_held` if the item is still as `expected` (None: never
        written). Returns whether it was written and what the item holds now: ours, or the winner's, read from
        the failed write itself (or consistently)."""
        condition = "attribute_not_exists(taken)" if expected.taken is None else "taken = :old"
        window_end_s = (item.window.index + 1) * item.window.width_us // 1_000_000
        values = {":new": s(_encoded(taken)), ":ttl": n(window_end_s + KEY_IDLE_TTL_S)}
        values |= fv_value("pacing") if expected.taken is None else {":old": s(_encoded(expected.taken))}
        change = _held_change(expected.held, new_held)
        # Only the write that may create the item names its format: a window's later writes find it there.
        update = "SET taken = :new, expire_at = :ttl" + (f", {KEEP_FV}" if expected.taken is None else "")
        update += f", {change.set}" if change.set else ""
        key = self._key(queue, item)
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=key,
                UpdateExpression=update + (f" {change.remove}" if change.remove else ""),
                ConditionExpression=f"{condition} AND {change.condition}",
                ExpressionAttributeValues=values | change.values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if code_of(exc) != "ConditionalCheckFailedException":
                raise StoreError(f"DynamoDB update_item failed: {exc}") from exc
            got = exc.response.get("Item")
            if got is None:
                got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            return False, _state(got)
        return True, PaceState(taken, new_held)

    def pace_state(self, queue: str, item: Item) -> PaceState:
        """A pacing item as it is now (read consistently, after a lost give-way or before a re-deal's write)."""
        return _state(
            self._guard("get_item", TableName=self.table, Key=self._key(queue, item), ConsistentRead=True).get("Item")
        )

    def held_fence(self, queue: str, item: Item, expected: str | None, new: str | None) -> dict[str, Any]:
        """The record's change as one action of a transaction (`Update`), conditional on it being `expected`
        (a changed record: the caller gives no fence for an unchanged one)."""
        change = _held_change(expected, new)
        fence: dict[str, Any] = {
            "TableName": self.table,
            "Key": self._key(queue, item),
            # A record set on a window not yet written creates its item: with its format.
            "UpdateExpression": f"SET {change.set}, {KEEP_FV}" if change.set else change.remove,
            "ConditionExpression": change.condition,
        }
        values = change.values | (fv_value("pacing") if change.set else {})
        return fence | ({"ExpressionAttributeValues": values} if values else {})

    def held_room(self, queue: str, item: Item, taken: tuple[int, ...]) -> int:
        """How long the record's text may be for its item to stay within one write unit (1 KB): the other
        attributes' names and values, at their largest, and the slots `taken`, taken off."""
        used = len(queue.encode()) + len(_sk(item).encode()) + len(_encoded(taken)) + OTHER_ATTRIBUTES_BYTES
        return ITEM_BYTES - used

    def pace_windows(
        self, queue: str, scope: str | None, width_us: int, first: int, count: int
    ) -> dict[int, PaceState]:
        """The used windows of a scope among `first` .. `first + count - 1` (one Query of small items; an
        eventually consistent one: a stale value costs the allocator a lost round, never the bound)."""
        bounds = [s(pace_sk(scope, (width_us, index))) for index in (first, first + count - 1)]
        values = {":q": s(queue), ":lo": bounds[0], ":hi": bounds[1]}
        key = "pk = :q AND sk BETWEEN :lo AND :hi"
        got = self._guard("query", TableName=self.table, KeyConditionExpression=key, ExpressionAttributeValues=values)
        return {int(item["sk"]["S"].rsplit("#", 1)[1]): _state(item) for item in got.get("Items", [])}

    def last_window(self, queue: str, width_us: int) -> int | None:
        """The last slot taken in the queue's furthest window of this width (µs; None: none used): one Query,
        newest first (the zero-padded index sorts windows in time order)."""
        got = self._guard(
            "query",
            TableName=self.table,
            KeyConditionExpression="pk = :q AND begins_with(sk, :p)",
            ExpressionAttributeValues={":q": s(queue), ":p": s(pace_window_prefix(None, width_us))},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items", [])
        taken = _state(items[0]).taken if items else None
        if not taken:
            return None
        return int(items[0]["sk"]["S"].rsplit("#", 1)[1]) * width_us + max(taken)

    def reset_pace(self, queue: str) -> None:
        """Forget the queue's own slots, every window of them (and the `#pace` cursor an older release kept): the
        next allocation starts from now (its keys' windows stay; they expire)."""
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

    def _key(self, queue: str, item: Item) -> dict[str, Any]:
        return {"pk": s(queue), "sk": s(_sk(item))}


def _sk(item: Item) -> str:
    return pace_sk(item.scope, (item.window.width_us, item.window.index))
