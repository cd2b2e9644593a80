"""The order items of an ordered queue's keys (v1.3): `<queue>` / `#order#<len>:<key>`, read strongly consistently
and written only on the version read, so two writers never both change one key; an idle key's item is deleted."""

from __future__ import annotations

from typing import Any

from hourglass.adapters.items import Item, checked, fv, n, s
from hourglass.adapters.table import Table
from hourglass.core.keys import ORDER_PREFIX, order_sk
from hourglass.core.ordering import KeyState, Waiter
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
                flow_key = item["sk"]["S"][len(ORDER_PREFIX) :].partition(":")[2]
                found.append((flow_key, _state(item)))
        return found

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
            item: Item = {**_key(queue, flow_key), "version": n(read.version + 1), "held": {"BOOL": state.held}}
            item |= fv("order")
            if state.head is not None:
                item["head"] = s(state.head)
            if state.waiting:
                item["waiting"] = {"M": {w.id: s(w.encode()) for w in state.waiting}}
            request: dict[str, Any] = {"TableName": self.table, "Item": item, "ConditionExpression": condition}
            if values:
                request["ExpressionAttributeValues"] = values
            self._conditional("put_item", f"key {flow_key!r} of {queue} changed", **request)
        except StaleVersionError:
            return False
        return True


def _key(queue: str, flow_key: str) -> Item:
    return {"pk": s(queue), "sk": s(order_sk(flow_key))}


def _state(item: Item) -> KeyState:
    checked("order", item)
    waiting = []
    for message_id, value in item.get("waiting", {}).get("M", {}).items():
        due_ms, _, created_ms = value["S"].partition("#")
        waiting.append(Waiter(int(due_ms), int(created_ms), message_id))
    head = item.get("head", {}).get("S")
    return KeyState(head, bool(item.get("held", {}).get("BOOL")), tuple(sorted(waiting)), int(item["version"]["N"]))
