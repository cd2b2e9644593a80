"""Message records for analytics, decoded from DynamoDB items with the Lambdas' own item mapping."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hourglass.adapters.items import Item, message_from_item
from hourglass.core.keys import MESSAGE_PREFIX
from hourglass.errors import NewerFormatError
from pyspark.sql import types as T

SCHEMA = T.StructType(
    [
        T.StructField("queue", T.StringType(), False),
        T.StructField("id", T.StringType(), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("created_at", T.TimestampType(), False),
        T.StructField("due_at", T.TimestampType(), False),
        T.StructField("delivered_at", T.TimestampType(), True),
        T.StructField("expires_at", T.TimestampType(), True),
        T.StructField("attempts", T.IntegerType(), False),
        T.StructField("last_error", T.StringType(), True),
        T.StructField("dedup_id", T.StringType(), True),
        T.StructField("version", T.IntegerType(), False),
        # The schedule a message is an occurrence of, and the occurrence's own time (retries move due_at).
        T.StructField("schedule", T.StringType(), True),
        T.StructField("occurrence_at", T.TimestampType(), True),
    ]
)
Record = tuple[
    str,
    str,
    str,
    datetime,
    datetime,
    datetime | None,
    datetime | None,
    int,
    str | None,
    str | None,
    int,
    str | None,
    datetime | None,
]


def is_message(item: Item) -> bool:
    """Queue settings, dedup records and sweeper state share the table; only `m#` items are messages."""
    return item.get("sk", {}).get("S", "").startswith(MESSAGE_PREFIX)


def record(item: Item) -> Record:
    message = message_from_item(item)
    return (
        message.queue,
        message.id,
        message.status.value,
        message.created_at,
        message.due_at,
        message.delivered_at,
        message.expires_at,
        message.attempts,
        message.last_error,
        message.dedup_id,
        message.version,
        message.schedule,
        message.occurrence_at,
    )


def records(items: Any, newer: Any = None) -> Any:
    """The records of the message items among `items` (an iterable of DynamoDB JSON items). A message item of a
    newer format than this release reads (a newer release's, docs/upgrades.md) is left out, counted in `newer`
    (a Spark accumulator) when given: a job of an older release reports what it can read instead of failing."""
    for item in items:
        if not is_message(item):
            continue
        try:
            yield record(item)
        except NewerFormatError:
            if newer is not None:
                newer.add(1)
