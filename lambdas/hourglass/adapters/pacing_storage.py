"""A rate-limited queue's pacing item `<queue>` / `#pace`: its next free start slot, moved by conditional writes."""

from __future__ import annotations

from botocore.exceptions import ClientError

from hourglass.adapters.items import n, s
from hourglass.adapters.table import Table, code_of
from hourglass.core.keys import PACE_SK
from hourglass.errors import StoreError


class PacingStorage(Table):
    def advance_pace(self, queue: str, expected_us: int | None, new_us: int) -> tuple[bool, int | None]:
        """`next_us` = `new_us` if it is still `expected_us` (None: never written). Returns (True, new_us)
        when written, else (False, the value that won), read from the failed write itself (or consistently)."""
        condition = "attribute_not_exists(next_us)" if expected_us is None else "next_us = :old"
        values = {":new": n(new_us)} | ({} if expected_us is None else {":old": n(expected_us)})
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key={"pk": s(queue), "sk": s(PACE_SK)},
                UpdateExpression="SET next_us = :new",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if code_of(exc) != "ConditionalCheckFailedException":
                raise StoreError(f"DynamoDB update_item failed: {exc}") from exc
            item = exc.response.get("Item")
            if item is None:
                item = self._guard(
                    "get_item", TableName=self.table, Key={"pk": s(queue), "sk": s(PACE_SK)}, ConsistentRead=True
                ).get("Item")
            return False, int(item["next_us"]["N"]) if item and "next_us" in item else None
        return True, new_us

    def reset_pace(self, queue: str) -> None:
        """Forget the queue's next free slot: the next allocation starts from now."""
        self._guard("delete_item", TableName=self.table, Key={"pk": s(queue), "sk": s(PACE_SK)})
