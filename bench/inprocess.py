"""In-process AWS for the benchmarks that need no runtime: Hourglass's table and timer queue under moto's
mock_aws, messages written straight into the table, and a service context with a fixed clock (`metered`: its
table calls priced, its timers dispatched in due order by `drain`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.http_target import HttpReply, check_url, post
from hourglass.adapters.items import STATE_KEY, message_to_item
from hourglass.adapters.metrics import Metrics
from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.storage import SweepProgress
from hourglass.adapters.store import Store
from hourglass.adapters.table import Meter
from hourglass.adapters.timer_queue import TimerQueue, read_timers
from hourglass.core import schedule
from hourglass.core.model import Message
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.sweep_state import SweepState
from hourglass.core.timestamps import from_ms
from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.settings import Settings

from bench.capacity_units import CapacityMeter, Index

TABLE = "messages"
# Where `Clock` starts; the due index as the meter prices it (the stack's projection).
T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
DUE_INDEX = Index("due", "sweep_pk", "sweep_sk", ("version", "flow_key", "priority"))


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


class Clock:
    """A fixed clock that moves only when set or slept on."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=max(0.0, seconds))


def ok(*_: Any, **__: Any) -> HttpReply:
    """A target that takes every request."""
    return HttpReply(status=200, headers={}, body=b"")


@dataclass
class Metered:
    """An in-process Hourglass on a fixed clock whose table calls are priced."""

    aws: Aws
    clock: Clock
    meter: CapacityMeter
    ctx: Context

    def drain(self) -> None:
        """Every timer on its own in due order, as SQS makes it visible on the fixed clock."""
        sqs, url = self.aws.sqs, self.aws.timer_url
        for _ in range(20):
            _lift_delays()
            timers = []
            while True:
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
                if not got.get("Messages"):
                    break
                for m in got["Messages"]:
                    timers += read_timers(m["Body"])
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            if not timers:
                return
            for timer in sorted(timers, key=lambda t: t.due_ms):
                self.clock.now = max(self.clock.now, from_ms(timer.due_ms - TIMER_HEAD_START * 1000))
                Dispatcher(self.ctx).run_batch([("r", timer.to_json())])


def metered(
    *, post: Callable[..., HttpReply] = ok, clock: Clock | None = None, projected: tuple[str, ...] = ("version",)
) -> Metered:
    """Inside mock_aws: the stack's table (its due index projecting `projected`) and timer queue, and a context
    whose store is metered (DynamoDB's rules, `CapacityMeter`), whose sleeps pass on `clock`, `post` the target."""
    aws = create(
        boto3.client("dynamodb", region_name="us-east-1"), boto3.client("sqs", "us-east-1"), projected=projected
    )
    meter = CapacityMeter(aws.table, [DUE_INDEX])
    clock = clock or Clock()
    store = Store(aws.table, client=aws.ddb, meter=meter)
    ctx = replace(
        context(aws, clock), store=store, sleep=clock.sleep, post=post, check_url=lambda url, allow_private: None
    )
    return Metered(aws, clock, meter, ctx)


def _lift_delays() -> None:
    """moto keeps DelaySeconds in wall time; the fixed clock stands in for it."""
    from moto.sqs.models import sqs_backends

    for queue in sqs_backends["123456789012"]["us-east-1"].queues.values():
        for message in queue._messages:
            message.delayed_until = 0.0


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


def meter_table(ctx: Context, meter: Meter) -> None:
    """Count what the context's table calls cost from now on (the DynamoDB store's own meter, not the contract's)."""
    store = ctx.store
    assert isinstance(store, Store)
    store.meter = meter


def reset_watermarks(ddb: Any, store: SweepProgress, table: str, watermark: int) -> None:
    """Start the next sweep at `watermark` (the state only moves forward, so it is replaced)."""
    ddb.delete_item(TableName=table, Key=STATE_KEY)
    store.save_sweep_state(SweepState(watermark, watermark))
