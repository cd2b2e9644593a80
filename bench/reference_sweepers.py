"""Reference designs, NOT Hourglass: the read side of two other ways to find what is due.

Kept to show what Hourglass's sparse due index saves: `scan_sweep` scans the whole table with a
filter; `dense_index_sweep` queries a due index that is not sparse, so messages already delivered
keep their index keys and are read (then filtered out) by every sweep of their buckets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hourglass.core import keys, schedule


def scan_sweep(ddb: Any, table: str, low_ms: int, high_ms: int) -> list[str]:
    """Ids of the pending messages due in (low, high]: a Scan of every item with a filter."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "#st = :pending AND due_at > :low AND due_at <= :high",
        "ProjectionExpression": "id",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {
            ":pending": {"S": "pending"},
            ":low": {"N": str(low_ms)},
            ":high": {"N": str(high_ms)},
        },
    }
    return [item["id"]["S"] for item in _pages(ddb.scan, kwargs)]


def dense_index_sweep(
    ddb: Any, table: str, low_ms: int, high_ms: int, *, shards: int, bucket_seconds: int
) -> list[str]:
    """The same buckets and shards as Hourglass's sweep, on an index that still holds finished messages."""
    found = []
    for bucket in schedule.buckets_between(low_ms + 1, high_ms, bucket_seconds):
        for shard in range(shards):
            kwargs: dict[str, Any] = {
                "TableName": table,
                "IndexName": "due",
                "KeyConditionExpression": "sweep_pk = :p AND sweep_sk BETWEEN :lo AND :hi",
                "FilterExpression": "#st = :pending",
                "ExpressionAttributeNames": {"#st": "status"},
                "ExpressionAttributeValues": {
                    ":p": {"S": keys.bucket_pk(bucket, shard)},
                    ":lo": {"S": keys.sort_key_bound(low_ms + 1, upper=False)},
                    ":hi": {"S": keys.sort_key_bound(high_ms, upper=True)},
                    ":pending": {"S": "pending"},
                },
            }
            found += [keys.split_sort_key(item["sweep_sk"]["S"])[1] for item in _pages(ddb.query, kwargs)]
    return found


def _pages(call: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    while True:
        page = call(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs = {**kwargs, "ExclusiveStartKey": page["LastEvaluatedKey"]}
