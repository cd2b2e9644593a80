"""In-process AWS for the benchmarks that need no runtime: Hourglass's table and timer queue under moto's
mock_aws, messages written straight into the table, and a service context with a fixed clock."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hourglass import contract
from hourglass.adapters.http_target import check_url, post
from hourglass.adapters.items import STATE_KEY, message_to_item
from hourglass.adapters.metrics import Metrics
from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.core import schedule
from hourglass.core.model import Message
from hourglass.core.sweep_state import SweepState
from hourglass.service.context import Context
from hourglass.settings import Settings

TABLE = "messages"


@dataclass
class Aws:
    ddb: Any
    sqs: Any
    table: str
    timer_url: str


def create(ddb: Any, sqs: Any, *, table: str = TABLE, projected: tuple[str, ...] = ("version",)) -> Aws:
    """The stack's table layout (bench/README: same keys and sparse GSI as stacks/constructs/message_table.py)."""
    create_table(ddb, table, projected)
    return Aws(ddb, sqs, table, sqs.create_queue(QueueName=f"{table}-timer")["QueueUrl"])


def create_table(ddb: Any, name: str, projected: tuple[str, ...]) -> str:
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            *(
                {"AttributeName": a, "AttributeType": "S"}
                for a in ("pk", "sk", "sweep_pk", "sweep_sk", "list_pk", "list_sk")
            ),
            {"AttributeName": "created_at", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "due",
                "KeySchema": [
                    {"AttributeName": "sweep_pk", "KeyType": "HASH"},
                    {"AttributeName": "sweep_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(projected)},
            },
            *(
                {
                    "IndexName": name,
                    "KeySchema": [
                        {"AttributeName": "list_pk", "KeyType": "HASH"},
                        {"AttributeName": sort, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
                for name, sort in ((contract.LIST_INDEX, "list_sk"), (contract.CREATED_INDEX, "created_at"))
            ),
        ],
    )
    return name


def context(aws: Aws, clock: Callable[[], datetime], **settings: Any) -> Context:
    return Context(
        settings=Settings(
            table=aws.table,
            timer_queue_url=aws.timer_url,
            allow_private_callbacks=True,
            **{"sqs_targets": "target*", **settings},
        ),
        store=Store(aws.table, client=aws.ddb),
        timers=TimerQueue(aws.timer_url, client=aws.sqs),
        targets=SqsTargets(client=aws.sqs),
        metrics=Metrics(emit=False),
        clock=clock,
        sleep=lambda seconds: None,
        post=post,
        check_url=check_url,
    )


def write(ddb: Any, table: str, messages: Iterable[Message], *, shards: int, indexed: bool = True) -> int:
    """BatchWriteItem of `messages` (with their due-index keys when `indexed`); returns how many."""
    batch: list[dict[str, Any]] = []
    count = 0
    for message in messages:
        keys = schedule.sweep_keys(message.id, message.due_at, shards=shards, bucket_seconds=60) if indexed else None
        batch.append({"PutRequest": {"Item": message_to_item(message, keys)}})
        count += 1
        if len(batch) == 25:
            _flush(ddb, table, batch)
            batch = []
    if batch:
        _flush(ddb, table, batch)
    return count


def _flush(ddb: Any, table: str, batch: list[dict[str, Any]]) -> None:
    pending: dict[str, Any] = {table: batch}
    while pending:
        pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def reset_watermarks(ddb: Any, store: Store, table: str, watermark: int) -> None:
    """Start the next sweep at `watermark` (the state only moves forward, so it is replaced)."""
    ddb.delete_item(TableName=table, Key=STATE_KEY)
    store.save_sweep_state(SweepState(watermark, watermark))
