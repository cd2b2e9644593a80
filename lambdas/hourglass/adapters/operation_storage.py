"""Bulk operations in the table: the operation item, its per-segment cursors, beats and counters, the list of
running operations, and each message's write."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta
from typing import Any

from hourglass import contract
from hourglass.adapters.items import checked, fv, message_from_item, message_key, n, s
from hourglass.adapters.table import Table
from hourglass.core.keys import (
    MESSAGE_PREFIX,
    OPERATION_PREFIX,
    RUNNING_OPERATIONS_PK,
    message_pks,
    operation_sk,
    running_operation_sk,
)
from hourglass.core.model import Message, Status
from hourglass.core.operations import (
    SEGMENTS,
    Action,
    Operation,
    OperationFilter,
    OperationRequest,
    OperationStatus,
    Progress,
    Workers,
    filter_doc,
    segment_bounds,
)
from hourglass.core.timestamps import from_ms, parse_rfc3339, to_ms
from hourglass.errors import StaleVersionError

Item = dict[str, Any]
Cursor = dict[str, Any] | None


def running_key(queue: str, operation_id: str) -> Item:
    """One small item per running operation, so that the sweeper finds the ones whose worker died with
    one Query (usually of nothing)."""
    return {"pk": s(RUNNING_OPERATIONS_PK), "sk": s(running_operation_sk(queue, operation_id))}


def _cursor_text(cursor: Cursor) -> str:
    return json.dumps(cursor, separators=(",", ":"))


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
    checked("operation", item)
    finished = item.get("finished_at")
    return Operation(
        id=item["sk"]["S"].removeprefix(OPERATION_PREFIX),
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
        """The new operation, running, with every segment still to do; listed as running first, so that a
        listed operation whose item is missing is only dropped from the list."""
        listed = {**running_key(operation.queue, operation.id), **fv("operation")}
        self._guard("put_item", TableName=self.table, Item=listed)
        self._conditional(
            "put_item",
            f"operation {operation.id} exists",
            TableName=self.table,
            Item={
                "pk": s(operation.queue),
                "sk": s(operation_sk(operation.id)),
                **fv("operation"),
                "request": s(_request_json(operation.request)),
                "op_status": s(operation.status.value),
                "matched": n(0),
                "applied": n(0),
                "skipped": n(0),
                "created_at": n(to_ms(operation.created_at)),
                "remaining": {"SS": [str(i) for i in range(SEGMENTS)]},
                "cursors": {"M": {}},
                "beats": {"M": {}},
            },
            ConditionExpression="attribute_not_exists(pk)",
        )

    def get_operation(self, queue: str, operation_id: str) -> Operation | None:
        key = {"pk": s(queue), "sk": s(operation_sk(operation_id))}
        got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        return operation_from_item(got["Item"]) if "Item" in got else None

    def operation_cursor(self, queue: str, operation_id: str, segment: int) -> tuple[bool, Cursor]:
        """Whether `segment` is still to do, and where its last recorded page ended (None: from the start)."""
        key = {"pk": s(queue), "sk": s(operation_sk(operation_id))}
        got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        item = got.get("Item")
        if item is None or str(segment) not in checked("operation", item).get("remaining", {}).get("SS", []):
            return False, None
        raw = item.get("cursors", {}).get("M", {}).get(str(segment))
        return True, json.loads(raw["S"]) if raw else None

    def segment_page(
        self,
        queue: str,
        segment: int,
        statuses: frozenset[Status],
        start: Cursor,
        limit: int,
        *,
        operation_id: str,
        partitions: int = 1,
    ) -> tuple[list[tuple[Message, bool]], Cursor]:
        """One page of a segment's messages in `statuses` or already written by the operation, each with
        whether it was (filtered server-side; `limit` counts the keys read, so a page redone from the same
        cursor covers the same keys). A segment is its range of the queue's partition, then, in a queue spread
        over `partitions`, its share of those (`segment_parts`); a cursor without a sort key starts the next."""
        parts = segment_parts(queue, segment, partitions)
        at = next((i for i, (pk, _, _) in enumerate(parts) if start is not None and start["pk"]["S"] == pk), 0)
        pk, low, high = parts[at]
        names = {f":s{i}": s(status.value) for i, status in enumerate(sorted(statuses))}
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND sk BETWEEN :lo AND :hi",
            "FilterExpression": f"#st IN ({', '.join(names)}) OR last_op = :op",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": {
                ":q": s(pk),
                ":lo": s(low),
                ":hi": s(high),
                ":op": s(operation_id),
                **names,
            },
            "Limit": limit,
            "ConsistentRead": True,
        }
        if start and "sk" in start:
            request["ExclusiveStartKey"] = start
        page = self._guard("query", **request)
        items = page.get("Items", [])
        done = [item.get("last_op", {}).get("S") == operation_id for item in items]
        after: Cursor = page.get("LastEvaluatedKey")
        if after is None and at + 1 < len(parts):
            after = {"pk": s(parts[at + 1][0])}
        return [(message_from_item(item), was) for item, was in zip(items, done, strict=True)], after

    def record_page(
        self,
        queue: str,
        operation_id: str,
        segment: int,
        pages: tuple[Cursor, Cursor],
        progress: Progress,
        *,
        now: datetime,
    ) -> bool:
        """A page's counters, the segment's new cursor and beat in one write; a finished segment leaves `remaining`.

        `pages` is (the cursor the page started from, the one after it). Conditioned on the segment still
        being to do and still at the page's start: False when another worker recorded it first (a restarted
        worker and one thought dead), which then owns the segment; so each page is counted once.
        """
        previous, cursor = pages
        key = {"pk": s(queue), "sk": s(operation_sk(operation_id))}
        values: dict[str, Any] = {
            ":m": n(progress.matched),
            ":a": n(progress.applied),
            ":k": n(progress.skipped),
            ":seg": s(str(segment)),
            ":now": n(to_ms(now)),
        }
        names = {"#seg": str(segment)}
        if cursor is None:
            update = (
                "ADD matched :m, applied :a, skipped :k DELETE remaining :segset SET beats.#seg = :now "
                "REMOVE cursors.#seg"
            )
            values[":segset"] = {"SS": [str(segment)]}
        else:
            update = "ADD matched :m, applied :a, skipped :k SET cursors.#seg = :cur, beats.#seg = :now"
            values[":cur"] = s(_cursor_text(cursor))
        if previous is None:
            at_start = "attribute_not_exists(cursors.#seg)"
        else:
            at_start = "cursors.#seg = :prev"
            values[":prev"] = s(_cursor_text(previous))
        try:
            self._conditional(
                "update_item",
                f"segment {segment} of operation {operation_id} is done or moved on",
                TableName=self.table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=f"contains(remaining, :seg) AND {at_start}",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except StaleVersionError:
            return False
        if cursor is None:
            self.finish_if_done(queue, operation_id, now)
        return True

    def running_operations(self) -> list[tuple[str, str]]:
        """(queue, operation id) of every operation listed as running."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :r",
            "ExpressionAttributeValues": {":r": s(RUNNING_OPERATIONS_PK)},
            "ConsistentRead": True,
        }
        listed: list[tuple[str, str]] = []
        for page in self._pages(request):
            for item in page.get("Items", []):
                queue, _, operation_id = checked("operation", item)["sk"]["S"].rpartition("/")
                listed.append((queue, operation_id))
        return listed

    def forget_operation(self, queue: str, operation_id: str) -> None:
        """Drop an operation from the running list (it finished, or its item is gone)."""
        self._guard("delete_item", TableName=self.table, Key=running_key(queue, operation_id))

    def operation_workers(self, queue: str, operation_id: str) -> tuple[Operation, Workers] | None:
        key = {"pk": s(queue), "sk": s(operation_sk(operation_id))}
        got = self._guard("get_item", TableName=self.table, Key=key, ConsistentRead=True)
        item = got.get("Item")
        if item is None:
            return None
        checked("operation", item)
        beats = {int(seg): from_ms(int(v["N"])) for seg, v in item.get("beats", {}).get("M", {}).items()}
        remaining = frozenset(int(seg) for seg in item.get("remaining", {}).get("SS", []))
        return operation_from_item(item), Workers(remaining, beats)

    def claim_segments(
        self, queue: str, operation_id: str, workers: Workers, segments: list[int], now: datetime
    ) -> bool:
        """Restart `segments` (their beats set to now) if their beats are still those in `workers`: of two
        sweepers that found the same dead worker, one restarts it."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {":now": n(to_ms(now))}
        sets, conditions = [], []
        for seg in segments:
            names[f"#s{seg}"] = str(seg)
            sets.append(f"beats.#s{seg} = :now")
            beat = workers.beats.get(seg)
            if beat is None:
                conditions.append(f"attribute_not_exists(beats.#s{seg})")
            else:
                values[f":b{seg}"] = n(to_ms(beat))
                conditions.append(f"beats.#s{seg} = :b{seg}")
        try:
            self._conditional(
                "update_item",
                f"operation {operation_id} was restarted by another sweeper",
                TableName=self.table,
                Key={"pk": s(queue), "sk": s(operation_sk(operation_id))},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except StaleVersionError:
            return False
        return True

    def finish_if_done(
        self, queue: str, operation_id: str, now: datetime, retention: timedelta = timedelta(days=7)
    ) -> None:
        """Mark the operation succeeded once no segment remains, and drop it from the running list."""
        key = {"pk": s(queue), "sk": s(operation_sk(operation_id))}
        # DynamoDB drops a string set that DELETE empties: that is when every segment is done.
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                "segments remain",
                TableName=self.table,
                Key=key,
                UpdateExpression="SET op_status = :done, finished_at = :now, #ttl = :exp REMOVE cursors, beats",
                ConditionExpression="attribute_not_exists(remaining) AND op_status = :running",
                ExpressionAttributeNames={"#ttl": contract.TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":done": s(OperationStatus.SUCCEEDED.value),
                    ":running": s(OperationStatus.RUNNING.value),
                    ":now": n(to_ms(now)),
                    ":exp": n(int((now + retention).timestamp())),
                },
            )
            self.forget_operation(queue, operation_id)

    def last_op(self, queue: str, message_id: str) -> str | None:
        """The operation that last wrote the message (None when none did, or it is gone)."""
        got = self._guard(
            "get_item",
            TableName=self.table,
            Key=message_key(queue, message_id),
            ConsistentRead=True,
            ProjectionExpression="last_op, fv",
        )
        value = checked("message", got.get("Item", {})).get("last_op")
        return None if value is None else str(value["S"])


def segment_parts(queue: str, segment: int, partitions: int) -> list[tuple[str, str, str]]:
    """(partition, first and last sort key) of each part of a segment: its id range of the queue's own partition,
    then every SEGMENTS-th of the partitions a spread queue's messages are in, whole."""
    low, high = segment_bounds(segment)
    spread = message_pks(queue, partitions)[1:]
    return [(queue, low, high), *((pk, MESSAGE_PREFIX, MESSAGE_PREFIX + "~") for pk in spread[segment::SEGMENTS])]
