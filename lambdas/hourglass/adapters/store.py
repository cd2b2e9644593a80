"""The DynamoDB message store: queues, messages, dedup records, the due index and sweeper state."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from hourglass.adapters import aws
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
from hourglass.core.model import Message, Queue, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StaleVersionError, StoreError, ValidationError

DUE_INDEX = "due"
SWEEPER_PK = "@sweeper"
STATE_KEY = {"pk": {"S": SWEEPER_PK}, "sk": {"S": "#state"}}
SHARD_PREFIX = "#shard#"
BATCH_WRITE = 25
Meter = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class DueEntry:
    queue: str
    id: str
    version: int
    due_ms: int


@dataclass(frozen=True)
class ShardProgress:
    """How far a fan-out worker swept one shard (every due time up to `watermark`), and what it read."""

    watermark: int
    due: int = 0
    run: int = 0
    complete: bool = True


@dataclass(frozen=True)
class SweepState:
    """The watermarks (every shard is swept up to `watermark`) and what the last scheduled run saw."""

    watermark: int
    recovery_watermark: int
    shards: Mapping[int, ShardProgress] = field(default_factory=dict)
    last_due: int = 0
    last_end: int = 0
    last_run: int = 0
    last_workers: int = 1
    last_complete: bool = True

    def start_of(self, shard: int) -> int:
        """Everything in `shard` due up to this has been swept: the global or the shard's own watermark."""
        progress = self.shards.get(shard)
        return max(self.watermark, progress.watermark) if progress else self.watermark


def _conditional_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class Store:
    def __init__(self, table: str, client: Any = None, meter: Meter | None = None) -> None:
        self.table = table
        self.client = client or aws.client("dynamodb")
        self.meter = meter

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        if self.meter is not None:
            kwargs.setdefault("ReturnConsumedCapacity", "INDEXES")
        try:
            response: dict[str, Any] = getattr(self.client, operation)(**kwargs)
        except ClientError:
            if self.meter is not None:
                self.meter(operation, {**kwargs, "_failed": True})
            raise
        if self.meter is not None:
            self.meter(operation, kwargs)
        return response

    def _guard(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return self._call(operation, **kwargs)
        except ClientError as exc:
            raise StoreError(f"DynamoDB {operation} failed: {exc}") from exc

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

    # messages -----------------------------------------------------------------------------
    def put_messages(self, entries: Iterable[tuple[Message, SweepKeys | None]]) -> None:
        requests = [{"PutRequest": {"Item": message_to_item(m, keys)}} for m, keys in entries]
        for start in range(0, len(requests), BATCH_WRITE):
            self._batch_write(requests[start : start + BATCH_WRITE])

    def _batch_write(self, requests: list[dict[str, Any]], attempts: int = 8) -> None:
        pending = {self.table: requests}
        for _ in range(attempts):
            answer = self._guard("batch_write_item", RequestItems=pending)
            pending = answer.get("UnprocessedItems") or {}
            if not pending:
                return
        raise StoreError(f"BatchWriteItem left {len(pending.get(self.table, []))} items unprocessed")

    def put_with_dedup(
        self, message: Message, keys: SweepKeys | None, *, now: datetime, window: timedelta
    ) -> str | None:
        """Store `message` unless its dedup id was used within `window`; then return the first id."""
        assert message.dedup_id is not None
        dedup = dedup_to_item(message.queue, message.dedup_id, message.id, now + window)
        try:
            self._call(
                "transact_write_items",
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
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise StoreError(f"DynamoDB TransactWriteItems failed: {exc}") from exc
        got = self._guard(
            "get_item", TableName=self.table, Key=dedup_key(message.queue, message.dedup_id), ConsistentRead=True
        )
        if "Item" not in got:
            raise StoreError("dedup record vanished while resolving a duplicate")
        return str(got["Item"]["message_id"]["S"])

    def get_message(self, queue: str, message_id: str, *, consistent: bool = True) -> Message | None:
        got = self._guard(
            "get_item", TableName=self.table, Key=message_key(queue, message_id), ConsistentRead=consistent
        )
        return message_from_item(got["Item"]) if "Item" in got else None

    def get_messages(self, queue: str, ids: list[str]) -> list[Message]:
        if not ids:
            return []
        keys = [message_key(queue, i) for i in ids]
        found: dict[str, Message] = {}
        request: dict[str, Any] = {self.table: {"Keys": keys}}
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
        start = _decode_cursor(cursor, queue) if cursor else None
        messages: list[Message] = []
        while len(messages) < limit:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :q AND begins_with(sk, :m)",
                "ExpressionAttributeValues": {":q": s(queue), ":m": s(MESSAGE_PREFIX)},
                "Limit": limit - len(messages),
            }
            if status is not None:
                kwargs["FilterExpression"] = "#st = :st"
                kwargs["ExpressionAttributeNames"] = {"#st": "status"}
                kwargs["ExpressionAttributeValues"][":st"] = s(status.value)
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = self._guard("query", **kwargs)
            messages.extend(message_from_item(item) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        return messages, _encode_cursor(start) if start else None

    def update_message(
        self,
        message: Message,
        *,
        expected_version: int,
        expected_status: Status | None = None,
        sweep: SweepKeys | None = None,
        expire_at: datetime | None = None,
    ) -> Message:
        """Write `message` over the stored one if that one still has `expected_version`."""
        item = message_to_item(message, sweep)
        if expire_at is not None:
            item["expire_at"] = n(int(expire_at.timestamp()))
        condition = "version = :v"
        values: dict[str, Any] = {":v": n(expected_version)}
        names: dict[str, str] = {}
        if expected_status is not None:
            condition += " AND #st = :st"
            values[":st"] = s(expected_status.value)
            names["#st"] = "status"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self._call("put_item", **kwargs)
        except ClientError as exc:
            if _conditional_failed(exc):
                raise StaleVersionError(f"message {message.id} changed") from exc
            raise StoreError(f"DynamoDB PutItem failed: {exc}") from exc
        return message

    def transition(
        self,
        queue: str,
        message_id: str,
        *,
        condition: str,
        values: dict[str, Any],
        updates: dict[str, Any],
        increment: tuple[str, ...] = (),
        remove: tuple[str, ...] = (),
    ) -> Message:
        """A conditional UpdateItem that returns the new message; StaleVersionError when it fails."""
        names = {"#st": "status"}
        sets = []
        for index, (attr, value) in enumerate(updates.items()):
            names[f"#a{index}"] = attr
            values[f":a{index}"] = value
            sets.append(f"#a{index} = :a{index}")
        for index, attr in enumerate(("version", *increment)):
            names[f"#i{index}"] = attr
            sets.append(f"#i{index} = if_not_exists(#i{index}, :zero) + :one")
        expression = "SET " + ", ".join(sets)
        values[":one"] = n(1)
        values[":zero"] = n(0)
        if remove:
            expression += " REMOVE " + ", ".join(remove)
        try:
            answer = self._call(
                "update_item",
                TableName=self.table,
                Key=message_key(queue, message_id),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _conditional_failed(exc):
                raise StaleVersionError(f"message {message_id} is not in the expected state") from exc
            raise StoreError(f"DynamoDB UpdateItem failed: {exc}") from exc
        return message_from_item(answer["Attributes"])

    def claim(self, entry: DueEntry, *, now: datetime, lease_until: datetime) -> bool:
        """Claim a due message for hand-off; False when another sweeper has it or it changed."""
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=message_key(entry.queue, entry.id),
                UpdateExpression="SET claimed_until = :lease",
                ConditionExpression=(
                    "version = :v AND #st = :pending AND "
                    "(attribute_not_exists(claimed_until) OR claimed_until < :now)"
                ),
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":v": n(entry.version),
                    ":pending": s(Status.PENDING.value),
                    ":now": n(to_ms(now)),
                    ":lease": n(to_ms(lease_until)),
                },
            )
            return True
        except ClientError as exc:
            if _conditional_failed(exc):
                return False
            raise StoreError(f"DynamoDB UpdateItem (claim) failed: {exc}") from exc

    def release(self, entry: DueEntry, *, lease_until: datetime) -> None:
        """Give a claim back (its send failed) so the next sweep takes it at once."""
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=message_key(entry.queue, entry.id),
                UpdateExpression="REMOVE claimed_until",
                ConditionExpression="version = :v AND claimed_until = :lease",
                ExpressionAttributeValues={":v": n(entry.version), ":lease": n(to_ms(lease_until))},
            )
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise StoreError(f"DynamoDB UpdateItem (release) failed: {exc}") from exc

    # due index ----------------------------------------------------------------------------
    def query_due(self, pk: str, low: str, high: str, *, limit: int = 500) -> Iterable[DueEntry]:
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "IndexName": DUE_INDEX,
                "KeyConditionExpression": "sweep_pk = :p AND sweep_sk BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {":p": s(pk), ":lo": s(low), ":hi": s(high)},
                "Limit": limit,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = self._guard("query", **kwargs)
            for item in page.get("Items", []):
                due_ms, _, message_id = item["sweep_sk"]["S"].partition("#")
                version = int(item["version"]["N"])
                yield DueEntry(queue=item["pk"]["S"], id=message_id, version=version, due_ms=int(due_ms))
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def load_sweep_state(self, default: SweepState) -> SweepState:
        """The state item and the shard items of fan-out workers, in one strongly consistent Query."""
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": s(SWEEPER_PK)},
                "ConsistentRead": True,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = self._guard("query", **kwargs)
            items.extend(page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        shards = {
            int(item["sk"]["S"].removeprefix(SHARD_PREFIX)): ShardProgress(
                watermark=int(item["watermark"]["N"]),
                due=int(item.get("due", {}).get("N", "0")),
                run=int(item.get("run", {}).get("N", "0")),
                complete=bool(item.get("complete", {}).get("BOOL", True)),
            )
            for item in items
            if item["sk"]["S"].startswith(SHARD_PREFIX)
        }
        state = next((item for item in items if item["sk"] == STATE_KEY["sk"]), None)
        if state is None:
            return replace(default, shards=shards)
        return SweepState(
            int(state["watermark"]["N"]),
            int(state["recovery_watermark"]["N"]),
            shards=shards,
            last_due=int(state.get("last_due", {}).get("N", "0")),
            last_end=int(state.get("last_end", {}).get("N", "0")),
            last_run=int(state.get("last_run", {}).get("N", "0")),
            last_workers=int(state.get("last_workers", {}).get("N", "1")),
            last_complete=bool(state.get("last_complete", {}).get("BOOL", True)),
        )

    def save_sweep_state(self, state: SweepState) -> None:
        """Move the watermarks forward only: a slower concurrent sweeper never moves them back.

        One write when both move forward (the usual case); otherwise each on its own.
        """
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=STATE_KEY,
                UpdateExpression=(
                    "SET watermark = :w, recovery_watermark = :r, last_due = :d, last_end = :e, "
                    "last_run = :run, last_workers = :k, last_complete = :c"
                ),
                ConditionExpression=(
                    "(attribute_not_exists(watermark) OR watermark <= :w) AND "
                    "(attribute_not_exists(recovery_watermark) OR recovery_watermark <= :r)"
                ),
                ExpressionAttributeValues={
                    ":w": n(state.watermark),
                    ":r": n(state.recovery_watermark),
                    ":d": n(state.last_due),
                    ":e": n(state.last_end),
                    ":run": n(state.last_run),
                    ":k": n(state.last_workers),
                    ":c": {"BOOL": state.last_complete},
                },
            )
            return
        except ClientError as exc:
            if not _conditional_failed(exc):
                raise StoreError(f"DynamoDB UpdateItem (state) failed: {exc}") from exc
        for attr, value in (("watermark", state.watermark), ("recovery_watermark", state.recovery_watermark)):
            try:
                self._call(
                    "update_item",
                    TableName=self.table,
                    Key=STATE_KEY,
                    UpdateExpression=f"SET {attr} = :w",
                    ConditionExpression=f"attribute_not_exists({attr}) OR {attr} < :w",
                    ExpressionAttributeValues={":w": n(value)},
                )
            except ClientError as exc:
                if not _conditional_failed(exc):
                    raise StoreError(f"DynamoDB UpdateItem (state) failed: {exc}") from exc

    def save_shard_progress(self, progress: Mapping[int, ShardProgress]) -> None:
        """Record a fan-out worker's progress per shard, forward only (one small item per shard)."""
        for shard, done in progress.items():
            try:
                self._call(
                    "update_item",
                    TableName=self.table,
                    Key={"pk": s(SWEEPER_PK), "sk": s(f"{SHARD_PREFIX}{shard}")},
                    UpdateExpression="SET watermark = :w, due = :d, #run = :run, complete = :c",
                    ConditionExpression="attribute_not_exists(watermark) OR watermark <= :w",
                    ExpressionAttributeNames={"#run": "run"},
                    ExpressionAttributeValues={
                        ":w": n(done.watermark),
                        ":d": n(done.due),
                        ":run": n(done.run),
                        ":c": {"BOOL": done.complete},
                    },
                )
            except ClientError as exc:
                if not _conditional_failed(exc):
                    raise StoreError(f"DynamoDB UpdateItem (shard state) failed: {exc}") from exc


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

