"""A message's attempt history items in the one table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hourglass import contract
from hourglass.adapters.items import Item, checked, fv, n, s
from hourglass.adapters.table import Table
from hourglass.core.attempts import Attempt, AttemptOutcome
from hourglass.core.keys import history_key, history_prefix, message_pk
from hourglass.core.timestamps import from_ms, to_ms


def attempt_to_item(queue: str, attempt: Attempt, expire_at: datetime | None = None) -> Item:
    item: Item = {
        "pk": s(message_pk(queue, attempt.message_id)),
        "sk": s(history_key(attempt.message_id, attempt.attempt)),
        **fv("attempt"),
        "id": s(attempt.message_id),
        "attempt": n(attempt.attempt),
        "started_at": n(to_ms(attempt.started_at)),
        "finished_at": n(to_ms(attempt.finished_at)),
        "outcome": s(attempt.outcome.value),
    }
    if attempt.status_code is not None:
        item["status_code"] = n(attempt.status_code)
    if attempt.error is not None:
        item["error"] = s(attempt.error)
    if attempt.response is not None:
        item["response"] = s(attempt.response)
    if attempt.retry_at is not None:
        item["retry_at"] = n(to_ms(attempt.retry_at))
    if expire_at is not None:
        item[contract.TTL_ATTRIBUTE] = n(int(expire_at.timestamp()))
    return item


def attempt_from_item(item: Item) -> Attempt:
    checked("attempt", item)
    return Attempt(
        message_id=item["id"]["S"],
        attempt=int(item["attempt"]["N"]),
        started_at=from_ms(int(item["started_at"]["N"])),
        finished_at=from_ms(int(item["finished_at"]["N"])),
        outcome=AttemptOutcome(item["outcome"]["S"]),
        status_code=int(item["status_code"]["N"]) if "status_code" in item else None,
        error=item["error"]["S"] if "error" in item else None,
        retry_at=from_ms(int(item["retry_at"]["N"])) if "retry_at" in item else None,
        response=item["response"]["S"] if "response" in item else None,
    )


class AttemptStorage(Table):
    # attempt history ----------------------------------------------------------------------
    def put_attempt(self, queue: str, attempt: Attempt, *, expire_at: datetime | None = None) -> None:
        self._guard("put_item", TableName=self.table, Item=attempt_to_item(queue, attempt, expire_at))

    def list_attempts(self, queue: str, message_id: str) -> list[Attempt]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :a)",
            "ExpressionAttributeValues": {":q": s(message_pk(queue, message_id)), ":a": s(history_prefix(message_id))},
            "ConsistentRead": True,
        }
        return [attempt_from_item(item) for page in self._pages(request) for item in page.get("Items", [])]

    def retain_attempts(
        self, queue: str, message_id: str, expire_at: datetime | None, *, except_attempt: int | None = None
    ) -> None:
        """Give a message's history the message's TTL (or none, while it lives again after a redelivery);
        `except_attempt` was written with it already."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :a)",
            "ExpressionAttributeValues": {":q": s(message_pk(queue, message_id)), ":a": s(history_prefix(message_id))},
            "ProjectionExpression": "pk, sk",
        }
        update: dict[str, Any] = {"UpdateExpression": "REMOVE #ttl"}
        if expire_at is not None:
            ttl = n(int(expire_at.timestamp()))
            update = {"UpdateExpression": "SET #ttl = :t", "ExpressionAttributeValues": {":t": ttl}}
        for page in self._pages(request):
            for item in page.get("Items", []):
                if except_attempt is not None and item["sk"]["S"] == history_key(message_id, except_attempt):
                    continue
                self._guard(
                    "update_item",
                    TableName=self.table,
                    Key={"pk": item["pk"], "sk": item["sk"]},
                    ExpressionAttributeNames={"#ttl": contract.TTL_ATTRIBUTE},
                    **update,
                )
