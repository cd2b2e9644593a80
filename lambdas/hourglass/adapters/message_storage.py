"""Queues, messages and dedup records in the table, and every conditional write of a message version."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

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
from hourglass.adapters.table import Table, code_of
from hourglass.core.lifecycle import Change, DeliveryStart
from hourglass.core.model import Message, Queue, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError, ValidationError

# A dedup transaction cancelled by throttling or a conflicting transaction is tried this often.
DEDUP_ATTEMPTS = 4
DEDUP_BACKOFF = 0.05
# A status-filtered list reads pages of this many items, and at most this many pages per request.
LIST_PAGE = 200
LIST_READ_PAGES = 5


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
        self,
        message: Message,
        keys: SweepKeys | None,
        *,
        now: datetime,
        window: timedelta,
        sleep: Callable[[float], None] = time.sleep,
    ) -> str | None:
        """Store `message` unless its dedup id was used within `window` in this queue's epoch; then the first id.

        Only a failed condition on a live dedup record of the same queue epoch is a duplicate. A
        transaction cancelled for anything else (throttling, a conflicting transaction) is tried
        again a few times with backoff, then raises StoreError (503): never a false duplicate.
        """
        assert message.dedup_id is not None
        epoch = to_ms(message.queue_epoch) if message.queue_epoch is not None else 0
        dedup = {**dedup_to_item(message.queue, message.dedup_id, message.id, now + window), "queue_epoch": n(epoch)}
        # A re-created queue (a new epoch) starts with no dedup history: its records of the old epoch
        # are overwritten. Records written before epochs were stored have none and keep their meaning.
        condition = "attribute_not_exists(pk) OR dedup_until < :now OR queue_epoch <> :epoch"
        for attempt in range(DEDUP_ATTEMPTS):
            try:
                self._call(
                    "transact_write_items",
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": dedup,
                                "ConditionExpression": condition,
                                "ExpressionAttributeValues": {":now": n(to_ms(now)), ":epoch": n(epoch)},
                            }
                        },
                        {"Put": {"TableName": self.table, "Item": message_to_item(message, keys)}},
                    ],
                )
                return None
            except ClientError as exc:
                if code_of(exc) != "TransactionCanceledException":
                    raise StoreError(f"DynamoDB transact_write_items failed: {exc}") from exc
                reasons = [str(r.get("Code", "")) for r in exc.response.get("CancellationReasons", [])]
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    first = self._live_dedup(message, now, epoch)
                    if first is not None:
                        return first
            if attempt + 1 < DEDUP_ATTEMPTS:
                sleep(DEDUP_BACKOFF * 2**attempt)
        raise StoreError(f"dedup transaction for {message.dedup_id!r} cancelled {DEDUP_ATTEMPTS} times")

    def _live_dedup(self, message: Message, now: datetime, epoch: int) -> str | None:
        """The message id of the live dedup record of this queue epoch, if there is one."""
        assert message.dedup_id is not None
        got = self._guard(
            "get_item", TableName=self.table, Key=dedup_key(message.queue, message.dedup_id), ConsistentRead=True
        )
        item = got.get("Item")
        if item is None or int(item["dedup_until"]["N"]) < to_ms(now):
            return None
        if "queue_epoch" in item and int(item["queue_epoch"]["N"]) != epoch:
            return None
        return str(item["message_id"]["S"])

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
        self, queue: str, *, status: Status | None, limit: int, cursor: str | None
    ) -> tuple[list[Message], str | None]:
        """A page of up to `limit` messages; with a status filter, at most LIST_READ_PAGES reads.

        Filtered reads use pages of LIST_PAGE items whatever is left to find, so the cost follows
        what is read, not one Query per stored item; a page may come back short, with a cursor.
        """
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :m)",
            "ExpressionAttributeValues": {":q": s(queue), ":m": s(MESSAGE_PREFIX)},
            "Limit": limit,
        }
        if status is not None:
            request["FilterExpression"] = "#st = :st"
            request["ExpressionAttributeNames"] = {"#st": "status"}
            request["ExpressionAttributeValues"][":st"] = s(status.value)
            request["Limit"] = max(limit, LIST_PAGE)
        messages: list[Message] = []
        last = None
        for reads, page in enumerate(self._pages(request, _decode_cursor(cursor, queue) if cursor else None), 1):
            items = page.get("Items", [])
            last = page.get("LastEvaluatedKey")
            for index, item in enumerate(items):
                messages.append(message_from_item(item))
                if len(messages) == limit:
                    # Cut inside a page: the next page starts after the last one returned.
                    if index < len(items) - 1 or last:
                        return messages, cursor_after(messages[-1])
                    return messages, None
            if status is None and len(messages) >= limit:
                break
            if reads >= LIST_READ_PAGES:
                break
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
