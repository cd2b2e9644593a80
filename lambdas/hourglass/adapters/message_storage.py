"""Queues, messages and dedup records in the table, and every conditional write of a message version."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from hourglass import contract
from hourglass.adapters.items import (
    MESSAGE_PREFIX,
    dedup_key,
    dedup_to_item,
    message_from_item,
    message_key,
    message_to_item,
    n,
    queue_from_item,
    queue_key,
    queue_to_item,
    s,
)
from hourglass.adapters.table import Table
from hourglass.core.lifecycle import Change, DeliveryStart
from hourglass.core.model import Message, Queue, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StaleVersionError, StoreError, ValidationError


class MessageStorage(Table):
    # queues -------------------------------------------------------------------------------
    def put_queue(self, queue: Queue) -> bool:
        """Create or replace; True when it was created."""
        old = self._guard("put_item", TableName=self.table, Item=queue_to_item(queue), ReturnValues="ALL_OLD")
        return "Attributes" not in old

    def get_queue(self, name: str, *, consistent: bool = False) -> Queue | None:
        got = self._guard("get_item", TableName=self.table, Key=queue_key(name), ConsistentRead=consistent)
        return queue_from_item(got["Item"]) if "Item" in got else None

    def delete_queue(self, name: str) -> bool:
        old = self._guard("delete_item", TableName=self.table, Key=queue_key(name), ReturnValues="ALL_OLD")
        return "Attributes" in old

    # new messages -------------------------------------------------------------------------
    def put_messages(self, entries: Iterable[tuple[Message, SweepKeys | None]]) -> None:
        self._batch_write([{"PutRequest": {"Item": message_to_item(m, keys)}} for m, keys in entries])

    def put_with_dedup(
        self, message: Message, keys: SweepKeys | None, *, now: datetime, window: timedelta
    ) -> str | None:
        """Store `message` unless its dedup id was used within `window`; then return the first id."""
        assert message.dedup_id is not None
        dedup = dedup_to_item(message.queue, message.dedup_id, message.id, now + window)
        try:
            self._conditional(
                "transact_write_items",
                "dedup id in use",
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": dedup,
                            "ConditionExpression": "attribute_not_exists(pk) OR dedup_until < :now",
                            "ExpressionAttributeValues": {":now": n(to_ms(now))},
                        }
                    },
                    {"Put": {"TableName": self.table, "Item": message_to_item(message, keys)}},
                ],
            )
            return None
        except StaleVersionError:
            pass
        got = self._guard(
            "get_item", TableName=self.table, Key=dedup_key(message.queue, message.dedup_id), ConsistentRead=True
        )
        if "Item" not in got:
            raise StoreError("dedup record vanished while resolving a duplicate")
        return str(got["Item"]["message_id"]["S"])

    # reads --------------------------------------------------------------------------------
    def get_message(self, queue: str, message_id: str, *, consistent: bool = True) -> Message | None:
        got = self._guard(
            "get_item", TableName=self.table, Key=message_key(queue, message_id), ConsistentRead=consistent
        )
        return message_from_item(got["Item"]) if "Item" in got else None

    def get_messages(self, queue: str, ids: list[str]) -> list[Message]:
        if not ids:
            return []
        found: dict[str, Message] = {}
        request: dict[str, Any] = {self.table: {"Keys": [message_key(queue, i) for i in ids]}}
        while request:
            answer = self._guard("batch_get_item", RequestItems=request)
            for item in answer.get("Responses", {}).get(self.table, []):
                message = message_from_item(item)
                found[message.id] = message
            request = answer.get("UnprocessedKeys") or {}
        return [found[i] for i in ids if i in found]

    def list_messages(
        self, queue: str, *, status: Status | None, limit: int, cursor: str | None, schedule: str | None = None
    ) -> tuple[list[Message], str | None]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :m)",
            "ExpressionAttributeValues": {":q": s(queue), ":m": s(MESSAGE_PREFIX)},
            "Limit": limit,
        }
        filters = []
        if status is not None:
            filters.append("#st = :st")
            request.setdefault("ExpressionAttributeNames", {})["#st"] = "status"
            request["ExpressionAttributeValues"][":st"] = s(status.value)
        if schedule is not None:
            filters.append("#sch = :sch")
            request.setdefault("ExpressionAttributeNames", {})["#sch"] = "schedule"
            request["ExpressionAttributeValues"][":sch"] = s(schedule)
        if filters:
            request["FilterExpression"] = " AND ".join(filters)
        messages: list[Message] = []
        last = None
        for page in self._pages(request, _decode_cursor(cursor, queue) if cursor else None):
            messages.extend(message_from_item(item) for item in page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if len(messages) >= limit:
                break
            request["Limit"] = limit - len(messages)
        return messages, _encode_cursor(last) if last else None

    # versions -----------------------------------------------------------------------------
    def cancel(self, change: Change) -> Message:
        return self._put_version(change)

    def reschedule(self, change: Change, keys: SweepKeys | None) -> Message:
        return self._put_version(change, keys)

    def await_retry(self, change: Change, keys: SweepKeys | None) -> Message:
        return self._put_version(change, keys)

    def finish(self, change: Change) -> Message:
        return self._put_version(change)

    def _put_version(self, change: Change, keys: SweepKeys | None = None) -> Message:
        """Write the new version over the stored one if that one still has the expected version and status."""
        message = change.message
        item = message_to_item(message, keys)
        if change.expire_at is not None:
            item[contract.TTL_ATTRIBUTE] = n(int(change.expire_at.timestamp()))
        self._conditional(
            "put_item",
            f"message {message.id} changed",
            TableName=self.table,
            Item=item,
            ConditionExpression="version = :v AND #st = :st",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":v": n(change.expected_version), ":st": s(change.expected_status.value)},
        )
        return message

    def begin_delivery(self, queue: str, message_id: str, start: DeliveryStart) -> Message:
        """pending(v) -> delivering with a lease and one more attempt, or take over an expired lease.

        Leaves the due index (its keys are removed); StaleVersionError when neither holds.
        """
        answer = self._conditional(
            "update_item",
            f"message {message_id} is not in the expected state",
            TableName=self.table,
            Key=message_key(queue, message_id),
            UpdateExpression=(
                "SET #st = :delivering, claimed_until = :lease, "
                "version = if_not_exists(version, :zero) + :one, attempts = if_not_exists(attempts, :zero) + :one "
                "REMOVE sweep_pk, sweep_sk"
            ),
            ConditionExpression="(#st = :pending AND version = :v) OR (#st = :delivering AND claimed_until < :now)",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":pending": s(Status.PENDING.value),
                ":v": n(start.version),
                ":delivering": s(Status.DELIVERING.value),
                ":now": n(to_ms(start.now)),
                ":lease": n(to_ms(start.lease_until)),
                ":one": n(1),
                ":zero": n(0),
            },
            ReturnValues="ALL_NEW",
        )
        return message_from_item(answer["Attributes"])


def cursor_after(message: Message) -> str:
    """The `next_cursor` of a list page that ends with `message`."""
    return _encode_cursor(message_key(message.queue, message.id))


def _encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str, queue: str) -> dict[str, Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if key["pk"]["S"] != queue or not key["sk"]["S"].startswith(MESSAGE_PREFIX) or len(key) != 2:
            raise ValueError("cursor is for another queue")
        return {"pk": s(key["pk"]["S"]), "sk": s(key["sk"]["S"])}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValidationError("cursor", "is not a valid cursor") from exc
