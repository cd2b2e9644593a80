"""What one life of a queue leaves in the table besides its messages (pacing cursor, concurrency slots,
schedules, operations), removed when it ends, and when its name's last life ended."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hourglass.adapters.items import checked, fv, n, s
from hourglass.adapters.operation_storage import running_key
from hourglass.adapters.table import Table
from hourglass.core.keys import ENDED_SK, OPERATION_PREFIX, QUEUE_SCOPED_PREFIXES
from hourglass.core.timestamps import from_ms, to_ms


class QueueLifetime(Table):
    def end_queue(self, name: str, at: datetime) -> None:
        """The queue's life ended at `at`: noted (a new life starts later), and what it left removed."""
        item = {"pk": s(name), "sk": s(ENDED_SK), **fv("queue_life"), "ended_at": n(to_ms(at))}
        self._guard("put_item", TableName=self.table, Item=item)
        self.clear_queue_items(name)

    def queue_ended_at(self, name: str) -> datetime | None:
        got = self._guard("get_item", TableName=self.table, Key={"pk": s(name), "sk": s(ENDED_SK)}, ConsistentRead=True)
        item = got.get("Item")
        return None if item is None else from_ms(int(checked("queue_life", item)["ended_at"]["N"]))

    def clear_queue_items(self, name: str, prefixes: Sequence[str] = QUEUE_SCOPED_PREFIXES) -> None:
        """Deletes the items of `prefixes` under the queue's name (and running operations' list entries):
        a deleted operation's worker stops at its next page, an occurrence of a deleted schedule is cancelled."""
        deletes: list[dict[str, Any]] = []
        for prefix in prefixes:
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :q AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":q": s(name), ":p": s(prefix)},
                "ProjectionExpression": "pk, sk",
                "ConsistentRead": True,
            }
            for page in self._pages(request):
                for item in page.get("Items", []):
                    deletes.append({"DeleteRequest": {"Key": {"pk": item["pk"], "sk": item["sk"]}}})
                    if prefix == OPERATION_PREFIX:
                        operation_id = item["sk"]["S"].removeprefix(OPERATION_PREFIX)
                        deletes.append({"DeleteRequest": {"Key": running_key(name, operation_id)}})
        self._batch_write(deletes)
