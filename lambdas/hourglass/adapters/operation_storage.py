"""Bulk operations in the table: the operation item, its per-segment cursors and counters, and each message's write."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta
from typing import Any

from hourglass import contract
from hourglass.adapters.items import message_from_item, message_key, n, s
from hourglass.adapters.table import Table
from hourglass.core.model import Message, Status
from hourglass.core.operations import (
    SEGMENTS,
    Action,
    Operation,
    OperationFilter,
    OperationRequest,
    OperationStatus,
    Progress,
    filter_doc,
    operation_key,
    segment_bounds,
)
from hourglass.core.timestamps import from_ms, parse_rfc3339, to_ms
from hourglass.errors import StaleVersionError

Item = dict[str, Any]
Cursor = dict[str, Any] | None


def _request_json(request: OperationRequest) -> str:
    doc: dict[str, Any] = {"action": request.action.value, "filter": filter_doc(request.filter)}
    if request.seconds is not None:
        doc["seconds"] = request.seconds
    return json.dumps(doc, separators=(",", ":"))


def _request_of(text: str) -> OperationRequest:
    doc = json.loads(text)
    raw = doc["filter"]
    times = {key: parse_rfc3339(raw[key]) if key in raw else None for key in ("due_after", "due_before")}
    status = Status(raw["status"]) if "status" in raw else None
    return OperationRequest(Action(doc["action"]), OperationFilter(status, **times), doc.get("seconds"))


def operation_from_item(item: Item) -> Operation:
    finished = item.get("finished_at")
    return Operation(
        id=item["sk"]["S"].removeprefix("o#"),
        queue=item["pk"]["S"],
        request=_request_of(item["request"]["S"]),
        created_at=from_ms(int(item["created_at"]["N"])),
        status=OperationStatus(item["op_status"]["S"]),
        progress=Progress(int(item["matched"]["N"]), int(item["applied"]["N"]), int(item["skipped"]["N"])),
        finished_at=from_ms(int(finished["N"])) if finished else None,
        error=item["error"]["S"] if "error" in item else None,
    )


class OperationStorage(Table):
    def put_operation(self, operation: Operation) -> None:
        """The new operation, running, with every segment still to do."""
        self._conditional(
            "put_item",
            f"operation {operation.id} exists",
            TableName=self.table,
            Item={
                "pk": s(operation.queue),
                "sk": s(operation_key(operation.id)),
                "request": s(_request_json(operation.request)),
                "op_status": s(operation.status.value),
                "matched": n(0),
                "applied": n(0),
                "skipped": n(0),
                "created_at": n(to_ms(operation.created_at)),
                "remaining": {"SS": [str(i) for i in range(SEGMENTS)]},
                "cursors": {"M": {}},
            },
            ConditionExpression="attribute_not_exists(pk)",
        )

    def get_operation(self, queue: str, operation_id: str) -> Operation | None:
        key = {"pk": s(queue), "sk": s(operation_key(operation_id))}
        got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        return operation_from_item(got["Item"]) if "Item" in got else None

    def operation_cursor(self, queue: str, operation_id: str, segment: int) -> tuple[bool, Cursor]:
        """Whether `segment` is still to do, and where its last recorded page ended (None: from the start)."""
        key = {"pk": s(queue), "sk": s(operation_key(operation_id))}
        got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        item = got.get("Item")
        if item is None or str(segment) not in item.get("remaining", {}).get("SS", []):
            return False, None
        raw = item.get("cursors", {}).get("M", {}).get(str(segment))
        return True, json.loads(raw["S"]) if raw else None

    def segment_page(
        self, queue: str, segment: int, statuses: frozenset[Status], start: Cursor, limit: int
    ) -> tuple[list[Message], Cursor]:
        """One page of a segment's messages in `statuses` (status is filtered server-side)."""
        low, high = segment_bounds(segment)
        names = {f":s{i}": s(status.value) for i, status in enumerate(sorted(statuses))}
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND sk BETWEEN :lo AND :hi",
            "FilterExpression": f"#st IN ({', '.join(names)})",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": {":q": s(queue), ":lo": s(low), ":hi": s(high), **names},
            "Limit": limit,
            "ConsistentRead": True,
        }
        if start:
            request["ExclusiveStartKey"] = start
        page = self._guard("query", **request)
        return [message_from_item(item) for item in page.get("Items", [])], page.get("LastEvaluatedKey")

    def record_page(
        self, queue: str, operation_id: str, segment: int, cursor: Cursor, progress: Progress, *, now: datetime
    ) -> None:
        """A page's counters and the segment's new cursor in one write; a finished segment leaves `remaining`.

        Conditioned on the segment still being to do, so a page redone after a crash is counted once.
        """
        key = {"pk": s(queue), "sk": s(operation_key(operation_id))}
        values: dict[str, Any] = {
            ":m": n(progress.matched),
            ":a": n(progress.applied),
            ":k": n(progress.skipped),
            ":seg": s(str(segment)),
        }
        names = {"#seg": str(segment)}
        if cursor is None:
            update = "ADD matched :m, applied :a, skipped :k DELETE remaining :segset REMOVE cursors.#seg"
            values[":segset"] = {"SS": [str(segment)]}
        else:
            update = "ADD matched :m, applied :a, skipped :k SET cursors.#seg = :cur"
            values[":cur"] = s(json.dumps(cursor, separators=(",", ":")))
        try:
            self._conditional(
                "update_item",
                f"segment {segment} of operation {operation_id} is done",
                TableName=self.table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression="contains(remaining, :seg)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except StaleVersionError:
            return
        if cursor is None:
            self._finish_if_done(key, now)

    def _finish_if_done(self, key: Item, now: datetime, retention: timedelta = timedelta(days=7)) -> None:
        # DynamoDB drops a string set that DELETE empties: that is when every segment is done.
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                "segments remain",
                TableName=self.table,
                Key=key,
                UpdateExpression="SET op_status = :done, finished_at = :now, #ttl = :exp REMOVE cursors",
                ConditionExpression="attribute_not_exists(remaining) AND op_status = :running",
                ExpressionAttributeNames={"#ttl": contract.TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":done": s(OperationStatus.SUCCEEDED.value),
                    ":running": s(OperationStatus.RUNNING.value),
                    ":now": n(to_ms(now)),
                    ":exp": n(int((now + retention).timestamp())),
                },
            )

    def last_op(self, queue: str, message_id: str) -> str | None:
        """The operation that last wrote the message (None when none did, or it is gone)."""
        got = self._guard(
            "get_item",
            TableName=self.table,
            Key=message_key(queue, message_id),
            ConsistentRead=True,
            ProjectionExpression="last_op",
        )
        value = got.get("Item", {}).get("last_op")
        return None if value is None else str(value["S"])
