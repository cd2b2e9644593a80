"""The queue list: one small item per queue under a partition of its own, so listing queues is a Query."""

from __future__ import annotations

import base64
import json
from typing import Any

from hourglass.adapters.items import checked, fv, queue_from_item, queue_key, s
from hourglass.adapters.table import Table
from hourglass.core.keys import REGISTRY_PK
from hourglass.core.model import Queue
from hourglass.core.validation import QUEUE_NAME
from hourglass.errors import ValidationError

BATCH_GET = 100


def registry_key(name: str) -> dict[str, Any]:
    return {"pk": s(REGISTRY_PK), "sk": s(name)}


class QueueRegistry(Table):
    def register_queue(self, name: str) -> None:
        """Written before the queue item: a name whose queue is missing is skipped when listing."""
        self._guard("put_item", TableName=self.table, Item={**registry_key(name), **fv("queue_life")})

    def unregister_queue(self, name: str) -> None:
        self._guard("delete_item", TableName=self.table, Key=registry_key(name))

    def list_queues(self, *, limit: int, cursor: str | None) -> tuple[list[Queue], str | None]:
        """Up to `limit` queues in name order from `cursor`, and the cursor after them (None at the end)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :r",
            "ExpressionAttributeValues": {":r": s(REGISTRY_PK)},
            "Limit": limit,
        }
        names: list[str] = []
        last = None
        for page in self._pages(request, registry_key(_decode(cursor)) if cursor else None):
            names.extend(checked("queue_life", item)["sk"]["S"] for item in page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if len(names) >= limit:
                break
            request["Limit"] = limit - len(names)
        found = self._queues(names)
        queues = [found[name] for name in names if name in found]
        return queues, queue_cursor(last["sk"]["S"]) if last else None

    def _queues(self, names: list[str]) -> dict[str, Queue]:
        found: dict[str, Queue] = {}
        for start in range(0, len(names), BATCH_GET):
            keys = [queue_key(name) for name in names[start : start + BATCH_GET]]
            request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                answer = self._guard("batch_get_item", RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    queue = queue_from_item(item)
                    found[queue.name] = queue
                request = answer.get("UnprocessedKeys") or {}
        return found


def queue_cursor(name: str) -> str:
    """The `next_cursor` of a queue list page that ends with queue `name`."""
    return base64.urlsafe_b64encode(json.dumps({"after": name}).encode()).decode()


def _decode(cursor: str) -> str:
    try:
        name = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
        if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
            raise ValueError("cursor names no queue")
        return name
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError("cursor", "is not a valid cursor") from exc
