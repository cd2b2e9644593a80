"""Calls on the one DynamoDB table: metering, errors, pagination and conditional writes in one place.

Every failed condition becomes `StaleVersionError`; every other `ClientError`, and every botocore
connection or read-timeout error (not a `ClientError`), a `StoreError`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.adapters.items import fv_value
from hourglass.core import formats, keys
from hourglass.errors import StaleVersionError, StoreError, ValidationError

BATCH_WRITE = 25
Meter = Callable[[str, dict[str, Any]], None]


def code_of(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def format_guard(kind: str) -> tuple[str, dict[str, Any]]:
    """A condition (and its value) that holds of an item whose format this release reads: an update on an item it
    did not read first leaves one of a newer release as it is (docs/upgrades.md, rule 3)."""
    return "(attribute_not_exists(fv) OR fv <= :fv)", fv_value(kind)


def check_failed(kind: str, exc: StaleVersionError) -> None:
    """NewerFormatError when a write (with ReturnValuesOnConditionCheckFailure ALL_OLD) failed on an item of a
    newer format rather than on its state."""
    cause = exc.__cause__
    old = cause.response.get("Item") if isinstance(cause, ClientError) else None
    if old and "fv" in old:
        formats.check(kind, int(old["fv"]["N"]))


def encode_cursor(key: dict[str, Any]) -> str:
    """A list page's `next_cursor`: the table key it ends at, opaque to the client."""
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str, queue: str, prefix: str, *, spread: bool = False) -> dict[str, Any]:
    """The table key a cursor names, only if it is one in `queue`'s partition (`spread`: or one its messages are
    spread over) under `prefix` (the kind of item the list reads); anything else is a 400 on `cursor`."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        pk = key["pk"]["S"]
        if pk != queue and not (spread and isinstance(pk, str) and keys.queue_of_pk(pk) == queue):
            raise ValueError("cursor is for another queue")
        if not key["sk"]["S"].startswith(prefix) or len(key) != 2:
            raise ValueError("cursor is for another queue")
        return {"pk": {"S": str(key["pk"]["S"])}, "sk": {"S": str(key["sk"]["S"])}}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValidationError("cursor", "is not a valid cursor") from exc


def decode_index_cursor(cursor: str, queue: str, sort_attribute: str, kind: str = "S") -> dict[str, Any]:
    """The index key an ordered list's cursor names: the table key and the list index key (`list_pk`, the queue's
    or a partition its messages are spread over, and `sort_attribute`, of type `kind`); anything else is a 400 on
    `cursor`."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        list_pk = key["list_pk"]["S"]
        if set(key) != {"pk", "sk", "list_pk", sort_attribute} or keys.queue_of_pk(str(list_pk)) != queue:
            raise ValueError("cursor is for another queue or order")
        sort = key[sort_attribute]
        if set(sort) != {kind} or not all(isinstance(key[k]["S"], str) for k in ("pk", "sk")):
            raise ValueError("not a key")
        if kind == "N":
            int(sort["N"])
        return {
            "pk": {"S": key["pk"]["S"]},
            "sk": {"S": key["sk"]["S"]},
            "list_pk": {"S": str(list_pk)},
            sort_attribute: {kind: str(value) for kind, value in sort.items()},
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValidationError("cursor", "is not a valid cursor") from exc


class Table:
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
        except BotoCoreError as exc:
            # EndpointConnectionError, ReadTimeoutError, ConnectionClosedError: the outcome of a
            # write is unknown, which the caller treats like any other failed call (503, retry).
            raise StoreError(f"DynamoDB {operation} failed: {exc}") from exc
        if self.meter is not None:
            self.meter(operation, kwargs)
        return response

    def _guard(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return self._call(operation, **kwargs)
        except ClientError as exc:
            raise StoreError(f"DynamoDB {operation} failed: {exc}") from exc

    def _conditional(self, operation: str, stale: str, **kwargs: Any) -> dict[str, Any]:
        """A conditional write: StaleVersionError(`stale`) when its condition (or transaction) fails."""
        try:
            return self._call(operation, **kwargs)
        except ClientError as exc:
            if code_of(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                raise StaleVersionError(stale) from exc
            raise StoreError(f"DynamoDB {operation} failed: {exc}") from exc

    def _delete_at_version(self, key: dict[str, Any], version: int, stale: str) -> None:
        """DeleteItem of `key` only while its item is at `version`: StaleVersionError(`stale`) otherwise."""
        self._conditional(
            "delete_item",
            stale,
            TableName=self.table,
            Key=key,
            ConditionExpression="version = :v",
            ExpressionAttributeValues={":v": {"N": str(version)}},
        )

    def _updated(self, stale: str, **kwargs: Any) -> bool:
        """A conditional UpdateItem on this table: False (nothing written) when its condition fails."""
        try:
            self._conditional("update_item", stale, TableName=self.table, **kwargs)
        except StaleVersionError:
            return False
        return True

    def _pages(self, request: dict[str, Any], start: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Query pages until the last; `request` is read again for each page, so a caller may shrink its Limit."""
        while True:
            page = self._guard("query", **request, **({"ExclusiveStartKey": start} if start else {}))
            yield page
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _batch_write(self, requests: list[dict[str, Any]], attempts: int = 8) -> None:
        for first in range(0, len(requests), BATCH_WRITE):
            pending = {self.table: requests[first : first + BATCH_WRITE]}
            for _ in range(attempts):
                pending = self._guard("batch_write_item", RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
            else:
                raise StoreError(f"BatchWriteItem left {len(pending.get(self.table, []))} items unprocessed")
