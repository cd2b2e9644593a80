"""Queue items in the table (pk = name, sk = `keys.QUEUE_SK`): created, read, written on the version read, paused,
spread and deleted, each with one conditional call; and a busy queue's window records (`core/message_partitions.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hourglass.adapters.items import fv, n, queue_from_item, queue_key, queue_to_item, s
from hourglass.adapters.table import Table
from hourglass.core import formats, message_partitions
from hourglass.core.keys import rate_sk
from hourglass.core.model import Queue
from hourglass.core.timestamps import to_ms
from hourglass.errors import NotFoundError, StaleVersionError


class QueueStorage(Table):
    def put_queue(self, queue: Queue) -> bool:
        """Create or replace whatever is stored (seeding); True when it was created. The API writes with
        `write_queue`, conditional on the version it read."""
        old = self._guard("put_item", TableName=self.table, Item=queue_to_item(queue), ReturnValues="ALL_OLD")
        return "Attributes" not in old

    def write_queue(self, queue: Queue, *, expected_version: int | None) -> None:
        """Create (`expected_version` None: only if absent) or replace the version read; else StaleVersionError."""
        if expected_version is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            # A queue stored before versions were is version 0.
            legacy = " OR attribute_not_exists(version)" if expected_version == 0 else ""
            condition = {
                "ConditionExpression": f"attribute_exists(pk) AND (version = :v{legacy})",
                "ExpressionAttributeValues": {":v": n(expected_version)},
            }
        self._conditional(
            "put_item", f"queue {queue.name} changed", TableName=self.table, Item=queue_to_item(queue), **condition
        )

    def get_queue(self, name: str, *, consistent: bool = False) -> Queue | None:
        got = self._guard("get_item", TableName=self.table, Key=queue_key(name), ConsistentRead=consistent)
        return queue_from_item(got["Item"]) if "Item" in got else None

    def delete_queue(self, name: str, epoch: datetime | None = None) -> bool:
        """Deletes the queue item, with `epoch` only that life of it (never a later queue of the same
        name); False when there was none to delete."""
        condition: dict[str, Any] = {"ConditionExpression": "attribute_exists(pk)"}
        if epoch is not None:
            condition = {
                "ConditionExpression": "created_at = :epoch",
                "ExpressionAttributeValues": {":epoch": n(to_ms(epoch))},
            }
        try:
            self._conditional(
                "delete_item", f"queue {name} is gone", TableName=self.table, Key=queue_key(name), **condition
            )
        except StaleVersionError:
            return False
        return True

    def set_paused(self, name: str, paused: bool, now: datetime | None = None) -> Queue:
        """One conditional update of the queue item; NotFoundError when the queue does not exist. A resume at
        `now` starts the circuit breaker's fresh window; either clears the reason the queue paused itself."""
        values: dict[str, Any] = {":p": {"BOOL": paused}, ":zero": n(0), ":one": n(1)}
        update = "SET paused = :p, version = if_not_exists(version, :zero) + :one"
        if not paused and now is not None:
            update += ", resumed_at = :r"
            values[":r"] = n(to_ms(now))
        try:
            answer = self._conditional(
                "update_item",
                f"queue {name} does not exist",
                TableName=self.table,
                Key=queue_key(name),
                # A new version: a settings write that read the queue before this one is refused (and retried).
                UpdateExpression=update + " REMOVE paused_reason",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except StaleVersionError as exc:
            raise NotFoundError(f"queue {name} does not exist") from exc
        return queue_from_item(answer["Attributes"])

    def add_to_window(self, name: str, window: int, count: int) -> int:
        """Adds `count` to the queue's record of `window` (TTL removes it an hour after); the record's total."""
        expire_at = (window + 1) * message_partitions.WINDOW_SECONDS + 3600
        answer = self._guard(
            "update_item",
            TableName=self.table,
            Key={"pk": s(name), "sk": s(rate_sk(window))},
            UpdateExpression="ADD taken :c SET fv = if_not_exists(fv, :fv), expire_at = :exp",
            ExpressionAttributeValues={":c": n(count), ":exp": n(expire_at), ":fv": fv("rate")["fv"]},
            ReturnValues="UPDATED_NEW",
        )
        return int(answer["Attributes"]["taken"]["N"])

    def spread_queue(self, name: str, epoch: datetime, partitions: int) -> bool:
        """`partitions` on that life of the queue item, at a new version (a settings write that read it before is
        refused and read again, so none takes it off), and its format raised to the one that has it."""
        return self._updated(
            f"queue {name} is spread or gone",
            Key=queue_key(name),
            UpdateExpression="SET #parts = :p, fv = :fv, version = if_not_exists(version, :zero) + :one",
            ConditionExpression="created_at = :epoch AND attribute_not_exists(#parts)",
            ExpressionAttributeNames={"#parts": "partitions"},
            ExpressionAttributeValues={
                ":p": n(partitions),
                ":fv": n(formats.queue_format(False, spread=True)),
                ":epoch": n(to_ms(epoch)),
                ":zero": n(0),
                ":one": n(1),
            },
        )
