"""The jobs' DynamoDB side: queue settings, parallel segment scans and the bulk writer of new messages.

The writer follows ingest (docs/design.md): existing ids and live dedup records are duplicates;
each row is handed off by `hourglass.service.handoff` as ingest hands off a message (timer first),
whose fall-back writes refused ones with due-index keys.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from hourglass import contract
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import Item, checked, dedup_key, dedup_to_item, message_from_item, message_key, s
from hourglass.adapters.message_storage import MessageStorage
from hourglass.adapters.store import Store
from hourglass.adapters.table import BATCH_WRITE
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.core import message_partitions, validation
from hourglass.core.handoff import Timing
from hourglass.core.keys import MESSAGE_PREFIX, spread_of
from hourglass.core.model import Message, Queue, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError, ValidationError
from hourglass.logs import log
from hourglass.service.handoff import HandOff
from hourglass.service.messages import DEDUP_WINDOW

from pipeline.deployment import Deployment

BATCH_GET = 100
# The job run that stored a message item (not part of the message: the API ignores it).
RUN_ATTRIBUTE = "bulk_run"
PROJECTION_NAMES = {
    "#p": "pk",
    "#s": "sk",
    "#m": "message_id",
    "#u": "dedup_until",
    "#r": RUN_ATTRIBUTE,
    "#t": "status",
    "#w": "sweep_pk",
    "#f": "fv",
}
THROTTLING = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
KB = 1024
SEGMENT_BYTES = 128 * 1024 * 1024
MAX_SEGMENTS = 1_000_000
MESSAGE_FILTER = {"FilterExpression": "begins_with(sk, :m)", "ExpressionAttributeValues": {":m": s(MESSAGE_PREFIX)}}


def load_queues(deployment: Deployment, names: Iterable[str]) -> dict[str, Queue]:
    """The settings of every named queue that exists (invalid names are left to row validation)."""
    store = Store(deployment.table, client=deployment.client("dynamodb"))
    found: dict[str, Queue] = {}
    for name in sorted(set(names)):
        try:
            validation.queue_name(name)
        except ValidationError:
            continue
        queue = store.get_queue(name, consistent=True)
        if queue is not None:
            found[name] = queue
    return found


def spread_queues(deployment: Deployment, queues: Iterable[Queue]) -> None:
    """Spreads these queues' messages (`core/message_partitions.py`), each still in the life it was read in."""
    store = Store(deployment.table, client=deployment.client("dynamodb"))
    for queue in queues:
        if queue.partitions == 1 and store.spread_queue(queue.name, queue.created_at, message_partitions.PARTITIONS):
            log("queue_spread", queue=queue.name, partitions=message_partitions.PARTITIONS, by="bulk load")


def scan_segments(deployment: Deployment, at_least: int) -> int:
    """Segments for a parallel Scan: one per SEGMENT_BYTES of the table (DescribeTable's size, refreshed
    about every six hours), at least `at_least`, at most DynamoDB's 1,000,000."""
    try:
        size = deployment.client("dynamodb").describe_table(TableName=deployment.table)["Table"].get("TableSizeBytes")
    except ClientError:
        size = None
    return max(at_least, min(MAX_SEGMENTS, -(-int(size or 0) // SEGMENT_BYTES)))


def scan_segment(deployment: Deployment, segment: int, segments: int) -> Iterator[Item]:
    """The message items of one segment of a parallel Scan."""
    pages = (
        deployment.client("dynamodb")
        .get_paginator("scan")
        .paginate(TableName=deployment.table, Segment=segment, TotalSegments=segments, **MESSAGE_FILTER)
    )
    for page in pages:
        yield from page.get("Items", [])


# ------------------------------------------------------------------------------------ writer


@dataclass(frozen=True)
class Planned:
    """A validated row to store: its item (DynamoDB JSON text, no due-index keys) and those keys."""

    queue: str
    id: str
    dedup_id: str | None
    status: str
    due_ms: int
    sweep_pk: str | None
    sweep_sk: str | None
    item: str

    @classmethod
    def from_row(cls, row: Any) -> Planned:
        return cls(row.queue, row.id, row.dedup_id, row.status, row.due_ms, row.sweep_pk, row.sweep_sk, row.item)


@dataclass(frozen=True)
class WriteSettings:
    lookahead: float = contract.DEFAULT_LOOKAHEAD
    handoff_safety: float = contract.DEFAULT_HANDOFF_SAFETY
    shards: int = contract.DEFAULT_SHARDS
    bucket_seconds: int = contract.DEFAULT_BUCKET_SECONDS
    chunk: int = 50
    retention_days: float = contract.DEFAULT_RETENTION_DAYS
    attempts: int = 10
    backoff_base: float = 0.05
    backoff_max: float = 5.0
    # This task's share of the job's --max-write-units (None: unpaced).
    write_units: float | None = None
    # The job run's id, stored on every message item it writes.
    run: str = ""

    @property
    def timing(self) -> Timing:
        return Timing(self.shards, self.bucket_seconds, self.lookahead, self.handoff_safety)


@dataclass
class WriteCounts:
    scheduled: int = 0
    handed_off: int = 0
    swept: int = 0
    expired: int = 0
    duplicate: int = 0
    handoff_fallback: int = 0
    # Requests DynamoDB throttled (UnprocessedItems/Keys or a throughput error), each retried.
    throttled: int = 0
    write_units: int = 0

    def count(self, name: str, value: int) -> None:
        """The hand-off's own counts (as `HandOff` reports them): timers sent, and timers SQS refused."""
        if name == "HandedOff":
            self.handed_off += value
        elif name == "HandoffFallback":
            self.handoff_fallback += value


@dataclass
class WriteBudget:
    """A token bucket of write units per second: halves its rate when throttled, climbs back on success.

    Tokens may go negative (a batch larger than a second's budget waits its turn after it).
    """

    ceiling: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    rate: float = field(init=False)
    tokens: float = field(init=False)
    last: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.rate = self.ceiling
        self.tokens = self.ceiling

    def take(self, units: float) -> None:
        now = self.clock()
        if self.last is not None:
            self.tokens = min(max(self.rate, 1.0), self.tokens + (now - self.last) * self.rate)
        self.last = now
        self.tokens -= units
        if self.tokens < 0:
            self.sleep(-self.tokens / self.rate)

    def throttled(self) -> None:
        self.rate = max(self.ceiling / 64, self.rate / 2)

    def succeeded(self) -> None:
        self.rate = min(self.ceiling, self.rate + self.ceiling / 20)


def write_units(request: dict[str, Any]) -> int:
    """DynamoDB's write units of one PutRequest: one per started KB (estimated from its JSON text)."""
    return max(1, -(-len(json.dumps(request["PutRequest"]["Item"], separators=(",", ":"))) // KB))


@dataclass
class TableWriter:
    """Writes chunks of planned messages; every call is safe to repeat (ids are deterministic)."""

    deployment: Deployment
    now: datetime
    settings: WriteSettings = WriteSettings()
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    sleep: Callable[[float], None] = time.sleep
    client: Any = None
    timers: Any = None
    counts: WriteCounts = field(default_factory=WriteCounts)
    budget: WriteBudget | None = None

    def __post_init__(self) -> None:
        self.client = self.client or self.deployment.client("dynamodb")
        if self.timers is None and self.deployment.timer_queue_url:
            self.timers = TimerQueue(self.deployment.timer_queue_url, client=self.deployment.client("sqs"))
        if self.budget is None and self.settings.write_units:
            self.budget = WriteBudget(self.settings.write_units, sleep=self.sleep)
        # Bodies are placed by the store's own rule (inline, body item or S3), as ingest places them.
        self.bodies = MessageStorage(self.deployment.table, client=self.client)
        bucket = self.deployment.body_bucket
        self.bodies.configure_bodies(
            retention=timedelta(days=self.settings.retention_days),
            body_store=BodyStore(bucket, client=self.deployment.client("s3")) if bucket else None,
        )

    def write_all(self, rows: Iterable[Planned]) -> WriteCounts:
        chunk: list[Planned] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= self.settings.chunk:
                self.write(chunk)
                chunk = []
        if chunk:
            self.write(chunk)
        return self.counts

    def write(self, chunk: Sequence[Planned]) -> None:
        new, ours = self._new(chunk)
        self.counts.duplicate += len(chunk) - len(new) - len(ours)
        self._count_stored(ours)
        wall = self.clock()
        # Stored now, as the API stores a message when it is posted; delays still count from `now`.
        messages = [replace(message_from_item(json.loads(planned.item)), created_at=wall) for planned in new]
        handed = self.counts.handed_off

        def put(placed: list[tuple[Message, SweepKeys | None]]) -> None:
            requests = []
            for planned, (message, keys) in zip(new, placed, strict=True):
                items = self.bodies.new_items(message, keys)
                if self.settings.run:
                    items[0][RUN_ATTRIBUTE] = s(self.settings.run)  # the message item comes first
                requests += [{"PutRequest": {"Item": item}} for item in items]
                if planned.dedup_id:
                    dedup = dedup_to_item(planned.queue, planned.dedup_id, planned.id, self.now + DEDUP_WINDOW)
                    requests.append({"PutRequest": {"Item": dedup}})
            self._batch_write(requests)
            self.bodies.count_new(message for message, _ in placed)

        # The message items are written after their timers, as ingest writes a message without a dedup id.
        HandOff(self.timers, self.settings.timing, metrics=self.counts).ingest(messages, wall, None, put)
        expired = sum(p.status == Status.EXPIRED.value for p in new)
        self.counts.scheduled += len(new)
        self.counts.expired += expired
        self.counts.swept += len(new) - (self.counts.handed_off - handed) - expired

    # ----------------------------------------------------------------------- existence check

    def _count_stored(self, items: Sequence[Item]) -> None:
        """Counts messages an earlier attempt of this task (same run) stored, as that attempt would have."""
        for item in items:
            status = item.get("status", {}).get("S")
            self.counts.scheduled += 1
            if status == Status.EXPIRED.value:
                self.counts.expired += 1
            elif status == Status.PENDING.value and "sweep_pk" not in item:
                self.counts.handed_off += 1
            else:
                self.counts.swept += 1

    def _new(self, chunk: Sequence[Planned]) -> tuple[list[Planned], list[Item]]:
        """The rows whose message does not exist and whose dedup id is not live for another message,
        and the message items this run already stored (a retried task's earlier attempt)."""
        keys = [message_key(p.queue, p.id) for p in chunk]
        keys += [dedup_key(p.queue, p.dedup_id, spread_of(p.id)) for p in chunk if p.dedup_id]
        found = self._batch_get(keys)
        now_ms = to_ms(self.now)
        new: list[Planned] = []
        ours: list[Item] = []
        for planned in chunk:
            existing = found.get(_key(message_key(planned.queue, planned.id)))
            if existing is not None:
                if self.settings.run and existing.get(RUN_ATTRIBUTE, {}).get("S") == self.settings.run:
                    ours.append(existing)
                continue
            dedup_at = dedup_key(planned.queue, planned.dedup_id, spread_of(planned.id)) if planned.dedup_id else None
            dedup = found.get(_key(dedup_at)) if dedup_at else None
            # A dedup record of a newer release is neither read nor written over (NewerFormatError: retried later).
            live = dedup is not None and int(checked("dedup", dedup)["dedup_until"]["N"]) >= now_ms
            if live and dedup is not None and dedup["message_id"]["S"] != planned.id:
                continue
            new.append(planned)
        return new, ours

    def _batch_get(self, keys: list[Item]) -> dict[tuple[str, str], Item]:
        found: dict[tuple[str, str], Item] = {}
        for start in range(0, len(keys), BATCH_GET):
            request: dict[str, Any] = {
                self.deployment.table: {
                    "Keys": keys[start : start + BATCH_GET],
                    "ConsistentRead": True,
                    "ProjectionExpression": ", ".join(PROJECTION_NAMES),
                    "ExpressionAttributeNames": PROJECTION_NAMES,
                }
            }
            for attempt in range(self.settings.attempts):
                answer = self._call("batch_get_item", RequestItems=request)
                if answer is None:  # throttled: the same request again
                    self._backoff(attempt)
                    continue
                for item in answer.get("Responses", {}).get(self.deployment.table, []):
                    found[_key(item)] = item
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                self._throttled()
                self._backoff(attempt)
            else:
                raise StoreError("BatchGetItem kept returning UnprocessedKeys")
        return found

    # ------------------------------------------------------------------------------ writing

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), BATCH_WRITE):
            pending = {self.deployment.table: requests[start : start + BATCH_WRITE]}
            for attempt in range(self.settings.attempts):
                units = sum(write_units(r) for r in pending[self.deployment.table])
                if self.budget is not None:
                    self.budget.take(units)
                answer = self._call("batch_write_item", RequestItems=pending)
                if answer is None:  # throttled: nothing was written
                    self._backoff(attempt)
                    continue
                left = answer.get("UnprocessedItems") or {}
                self.counts.write_units += units - sum(write_units(r) for r in left.get(self.deployment.table, []))
                pending = left
                if not pending:
                    if self.budget is not None:
                        self.budget.succeeded()
                    break
                self._throttled()
                self._backoff(attempt)
            else:
                left = len(pending.get(self.deployment.table, []))
                raise StoreError(f"BatchWriteItem left {left} items unprocessed after {self.settings.attempts} tries")

    def _backoff(self, attempt: int) -> None:
        """Exponential backoff with full jitter, so throttled partitions do not retry in step."""
        ceiling = min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt)
        self.sleep(random.uniform(0, ceiling))

    def _throttled(self) -> None:
        self.counts.throttled += 1
        if self.budget is not None:
            self.budget.throttled()

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any] | None:
        """The answer, or None when DynamoDB throttled the request (counted; the caller retries)."""
        try:
            answer: dict[str, Any] = getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in THROTTLING:
                self._throttled()
                return None
            raise StoreError(f"DynamoDB {operation} failed: {exc}") from exc
        return answer


def _key(item: Item) -> tuple[str, str]:
    return item["pk"]["S"], item["sk"]["S"]
