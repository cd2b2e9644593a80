"""Schedules in the table (pk = queue, sk = "s#<name>"), written conditionally on their version (occurrences are
messages: `MessageStorage.put_occurrence`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hourglass import contract
from hourglass.adapters.items import checked, fv, n, s, schedule_from_item, schedule_key, schedule_to_item
from hourglass.adapters.table import Table, decode_cursor, encode_cursor
from hourglass.core.keys import REPAIR_PK, REPAIR_SK, SCHEDULE_PREFIX, SCHEDULES_PK
from hourglass.core.recurrence import Schedule
from hourglass.core.repair_round import RepairRound
from hourglass.core.timestamps import from_ms, to_ms

# Where the chain repair has got to in its round of every schedule (one small item).
REPAIR_KEY = {"pk": s(REPAIR_PK), "sk": s(REPAIR_SK)}


class ScheduleStorage(Table):
    def get_schedule(self, queue: str, name: str, *, consistent: bool = True) -> Schedule | None:
        got = self._guard("get_item", TableName=self.table, Key=schedule_key(queue, name), ConsistentRead=consistent)
        return schedule_from_item(got["Item"]) if "Item" in got else None

    def put_schedule(self, schedule: Schedule, *, expected_version: int | None) -> Schedule:
        """Create (`expected_version` None: only if absent) or overwrite the stored version; else StaleVersionError."""
        if expected_version is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": n(expected_version)},
            }
        self._conditional(
            "put_item",
            f"schedule {schedule.name} changed",
            TableName=self.table,
            Item=schedule_to_item(schedule),
            **condition,
        )
        return schedule

    def delete_schedule(self, schedule: Schedule) -> None:
        key = schedule_key(schedule.queue, schedule.name)
        self._delete_at_version(key, schedule.version, f"schedule {schedule.name} changed")

    def list_schedules(self, queue: str, *, limit: int, cursor: str | None) -> tuple[list[Schedule], str | None]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":q": s(queue), ":s": s(SCHEDULE_PREFIX)},
            "Limit": limit,
        }
        found: list[Schedule] = []
        last = None
        for page in self._pages(request, decode_cursor(cursor, queue, SCHEDULE_PREFIX) if cursor else None):
            found.extend(schedule_from_item(item) for item in page.get("Items", []))
            last = page.get("LastEvaluatedKey")
            if len(found) >= limit:
                break
            request["Limit"] = limit - len(found)
        return found, encode_cursor(last) if last else None

    def schedule_round(self, after: str | None, limit: int) -> tuple[list[Schedule], str | None]:
        """Up to `limit` schedules of every queue, in (queue, name) order after the round's position `after`,
        and the position to go on from (None: the round is over). Reads the due index, then the items."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": contract.DUE_INDEX,
            "KeyConditionExpression": "sweep_pk = :p" + ("" if after is None else " AND sweep_sk > :a"),
            "ExpressionAttributeValues": {":p": s(SCHEDULES_PK), **({} if after is None else {":a": s(after)})},
            "Limit": limit,
        }
        page = self._guard("query", **request)
        rows = page.get("Items", [])
        keys = [{"pk": row["pk"], "sk": row["sk"]} for row in rows]
        position = rows[-1]["sweep_sk"]["S"] if rows and page.get("LastEvaluatedKey") else None
        return self._schedules(keys), position

    def _schedules(self, keys: list[dict[str, Any]]) -> list[Schedule]:
        """The schedules of `keys` (a page of the round), eventually consistent: one Query per queue over the range
        of names, priced by the total size read rather than per item. A stale read is harmless: the repair's put is
        conditional, and an occurrence of a replaced version is cancelled at its attempt."""
        names: dict[str, list[str]] = {}
        for key in keys:
            names.setdefault(key["pk"]["S"], []).append(key["sk"]["S"])
        found: list[Schedule] = []
        for queue, sort_keys in names.items():
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :q AND sk BETWEEN :first AND :last",
                "ExpressionAttributeValues": {":q": s(queue), ":first": s(min(sort_keys)), ":last": s(max(sort_keys))},
            }
            for page in self._pages(request):
                found.extend(schedule_from_item(item) for item in page.get("Items", []))
        return sorted(found, key=lambda schedule: (schedule.queue, schedule.name))

    def repair_position(self) -> RepairRound:
        # Eventually consistent: a stale position at worst looks at a batch again or starts a round early.
        got = self._guard("get_item", TableName=self.table, Key=REPAIR_KEY, ConsistentRead=False).get("Item", {})
        checked("sweep", got)
        started, took = got.get("started", {}).get("N"), got.get("took", {}).get("N")
        return RepairRound(
            got.get("after", {}).get("S"),
            None if started is None else from_ms(int(started)),
            None if took is None else timedelta(milliseconds=int(took)),
        )

    def save_repair_position(self, position: RepairRound) -> None:
        item = {**REPAIR_KEY, **fv("sweep")}
        if position.after is not None:
            item["after"] = s(position.after)
        if position.started is not None:
            item["started"] = n(to_ms(position.started))
        if position.took is not None:
            item["took"] = n(int(position.took / timedelta(milliseconds=1)))
        self._guard("put_item", TableName=self.table, Item=item)
