"""Target 3b, cost by body size: what a delivered message costs with 100 B to 256 KB bodies, per path.

DynamoDB units are DynamoDB's rules (bench.capacity_units) applied to the items the layout writes
at each step, built by the same functions the store uses (hourglass.adapters.items, core.body_placement);
S3 requests and storage follow from where that layout puts the body. SQS, Lambda and log figures
per message are the ones measured: SQS and Lambda in the precision run, log bytes through the
handlers (bench.log_bytes). Priced at published on-demand us-east-1 prices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hourglass.adapters.items import BodyRef, body_key, item_size, message_to_item, new_message_write
from hourglass.core import delivery, schedule
from hourglass.core.attempts import Attempt, AttemptOutcome
from hourglass.core.body_placement import Placement, body_expiry, keep_days
from hourglass.core.ids import new_id
from hourglass.core.model import Message, Status

from bench.capacity_units import CapacityMeter, Index
from bench.cost import (
    BILLED_SQS,
    MEMORY_GB,
    PRICE_LAMBDA_GB_SECOND,
    PRICE_LAMBDA_REQUEST,
    PRICE_READ_UNIT,
    PRICE_SCHEDULER_INVOCATION,
    PRICE_SQS_REQUEST,
    PRICE_STEP_TRANSITION,
    PRICE_WRITE_UNIT,
)
from bench.log_bytes import PLATFORM_BYTES_PER_INVOCATION, Captured
from bench.report import Section

# Published on-demand prices, us-east-1 (the others are bench.cost's).
PRICE_DYNAMODB_GB_MONTH = 0.25
PRICE_S3_PUT = 0.005 / 1000
PRICE_S3_GET = 0.0004 / 1000
PRICE_S3_GB_MONTH = 0.023
PRICE_LOGS_GB = 0.50

SIZES = (100, 1024, 4 * 1024, 64 * 1024, 256 * 1024)
SQS_CHUNK = 64 * 1024
SCHEDULER_CHUNK = 64 * 1024
HOURS_PER_MONTH = 730
# DynamoDB bills 100 bytes of overhead per stored item (and per index entry).
ITEM_OVERHEAD = 100
DUE_INDEX = Index("due", "sweep_pk", "sweep_sk", ("version",))
RETENTION = timedelta(days=7)
LEASE = timedelta(seconds=120)
# Assumptions for the S3 claim check, billed as Lambda time (not overlapped with anything, so high):
# a PutObject at ingest and a GetObject at dispatch, each at its function's memory.
S3_PUT_SECONDS = 0.040
S3_GET_SECONDS = 0.025

BUDGETS = {100: 5.10, 4 * 1024: 9.0, 64 * 1024: 15.0, 256 * 1024: 20.0}
LOG_BUDGET_BYTES = 1024
START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Measured:
    """Per delivered message, from the precision run and the log measurement."""

    sqs_requests: float = 0.205
    lambda_invocations: float = 0.122
    lambda_gb_seconds: float = 0.081
    shared_write_units: float = 0.03
    shared_read_units: float = 0.18
    log_bytes: float = 230.0
    log_bytes_lone_message: float = 720.0


def measured_from(cost: Section, lone: Captured, batch: Captured) -> Measured:
    """The per-message figures of the precision run's cost section and of the log measurements."""
    data = cost.data
    delivered = max(1, int(data["messages"]["delivered"]))
    lambdas = data["lambda"]
    invocations = sum(v["invocations"] for v in lambdas.values()) / delivered
    shared = data["dynamodb"]["shared"]
    return Measured(
        sqs_requests=sum(data["sqs_requests"].get(name, 0) for name in BILLED_SQS) / delivered,
        lambda_invocations=invocations,
        lambda_gb_seconds=sum(v["seconds"] * MEMORY_GB.get(k, 0.5) for k, v in lambdas.items()) / delivered,
        shared_write_units=sum(v["write"] for v in shared.values()) / delivered,
        shared_read_units=float(data["dynamodb"]["swept_per_message"]["read"]),
        log_bytes=batch.per_message + PLATFORM_BYTES_PER_INVOCATION * invocations,
        log_bytes_lone_message=float(lone.bytes),
    )


@dataclass(frozen=True)
class Units:
    write: float = 0.0
    read: float = 0.0
    s3_put: int = 0
    s3_get: int = 0
    ddb_gb_months: float = 0.0
    s3_gb_months: float = 0.0
    placement: str = ""
    max_item_bytes: int = 0


def layout_units(size: int, *, path: str, delay: timedelta, inline_always: bool = False) -> Units:
    """What one message with a `size`-byte body costs in DynamoDB and S3 on `path` ("sweep" or
    "hand-off"), step by step, with the items the layout writes; `inline_always` is the old layout."""
    created = START
    due = created + delay
    message = Message(
        id=new_id(),
        queue="orders",
        body="x" * (size - 2),
        status=Status.PENDING,
        created_at=created,
        due_at=due,
        queue_epoch=created,
    )
    keys = schedule.sweep_keys(message.id, due, shards=8, bucket_seconds=60)
    lease = due + LEASE
    # Ingest: on the sweep path with due-index keys; on the hand-off path with a lease (timer sent first).
    first, first_keys = (message, keys) if path == "sweep" else (replace(message, claimed_until=lease), None)
    if inline_always:
        ref, written = BodyRef(Placement.INLINE, 1), [message_to_item(first, first_keys)]
    else:
        new = new_message_write(first, first_keys, retention=RETENTION)
        ref, written = new.body.ref, new.items
    meter = CapacityMeter("messages", [DUE_INDEX])
    for item in written:
        meter("put_item", {"Item": item})
    body_item = written[1] if len(written) > 1 else None

    def put(msg: Message, sweep: Any = None, expire_at: datetime | None = None) -> dict[str, Any]:
        item = message_to_item(msg, sweep, body=ref)
        if expire_at is not None:
            item["expire_at"] = {"N": str(int(expire_at.timestamp()))}
        meter("put_item", {"Item": item})
        return item

    sizes = [item_size(written[0])]
    if path == "sweep":
        sizes.append(item_size(put(replace(message, claimed_until=lease), keys)))  # the sweeper's claim
    delivering = replace(message, status=Status.DELIVERING, version=2, attempts=1, claimed_until=lease)
    sizes.append(item_size(put(delivering)))  # the start of the attempt (index keys removed)
    if body_item is not None:
        meter("get_item", {"Key": body_key(message.queue, message.id, ref.version), "ConsistentRead": True})
    # The outcome write carries the attempt that ended the message (its attempt history).
    final = Attempt(message.id, 1, due, due + timedelta(milliseconds=40), AttemptOutcome.DELIVERED, 200)
    done = replace(
        delivering, status=Status.DELIVERED, version=3, delivered_at=due, claimed_until=None, final_attempt=final
    )
    sizes.append(item_size(put(done, expire_at=due + RETENTION)))  # the outcome; TTL removes it later
    keys_units, uses = meter.snapshot()
    write = sum(u.write for u in keys_units.values()) + sum(u.write for u in uses.values())
    read = sum(u.read for u in keys_units.values()) + sum(u.read for u in uses.values())
    if meter.errors:
        raise RuntimeError(f"capacity rules could not price the layout: {meter.errors}")
    lifetime = delay + RETENTION
    months = lifetime.total_seconds() / 3600 / HOURS_PER_MONTH
    stored = max(sizes) + ITEM_OVERHEAD
    ddb_gb_months = stored / 1e9 * months
    if body_item is not None:
        body_months = (lifetime + (body_expiry(due, RETENTION) - due - RETENTION)).total_seconds() / 3600
        ddb_gb_months += (item_size(body_item) + ITEM_OVERHEAD) / 1e9 * body_months / HOURS_PER_MONTH
    s3 = ref.placement is Placement.S3
    # An S3 body is kept as long as its message (GET returns it): the lifecycle rung of its keep-days tag.
    kept = keep_days(START, body_expiry(due, RETENTION))
    s3_months = kept * 24 / HOURS_PER_MONTH
    return Units(
        write=write,
        read=read,
        s3_put=int(s3),
        s3_get=int(s3),
        ddb_gb_months=ddb_gb_months,
        s3_gb_months=size / 1e9 * s3_months if s3 else 0.0,
        placement=ref.placement.value,
        max_item_bytes=max(sizes),
    )


def dollars(units: Units, measured: Measured) -> dict[str, float]:
    """US$ per million messages, per service."""
    million = 1e6
    s3_gb_seconds = (
        units.s3_put * S3_PUT_SECONDS * MEMORY_GB["ingest"] + units.s3_get * S3_GET_SECONDS * MEMORY_GB["dispatcher"]
    )
    figures = {
        "DynamoDB requests": (
            (units.write + measured.shared_write_units) * PRICE_WRITE_UNIT
            + (units.read + measured.shared_read_units) * PRICE_READ_UNIT
        ),
        "DynamoDB storage": units.ddb_gb_months * PRICE_DYNAMODB_GB_MONTH,
        "S3": units.s3_put * PRICE_S3_PUT + units.s3_get * PRICE_S3_GET + units.s3_gb_months * PRICE_S3_GB_MONTH,
        "SQS": measured.sqs_requests * PRICE_SQS_REQUEST,
        "Lambda": measured.lambda_invocations * PRICE_LAMBDA_REQUEST
        + (measured.lambda_gb_seconds + s3_gb_seconds) * PRICE_LAMBDA_GB_SECOND,
        "CloudWatch Logs": measured.log_bytes / 1e9 * PRICE_LOGS_GB,
    }
    figures = {k: v * million for k, v in figures.items()}
    figures["total"] = sum(figures.values())
    return {k: round(v, 3) for k, v in figures.items()}


def target_sqs_requests(size: int) -> int:
    """SendMessage requests the delivery to an SQS target is billed as (64 KB chunks of its envelope)."""
    message = Message(
        id=new_id(), queue="orders", body="x" * (size - 2), status=Status.DELIVERING, created_at=START, due_at=START
    )
    return math.ceil(len(delivery.sqs_envelope(message, 1).encode()) / SQS_CHUNK)


def rows(measured: Measured) -> list[dict[str, Any]]:
    """One row per path, delay and body size."""
    found = []
    for path, delay, label in (
        ("sweep", timedelta(days=1), "sweep, 1 d"),
        ("sweep", timedelta(days=30), "sweep, 30 d"),
        ("hand-off", timedelta(minutes=5), "hand-off, ≤ 5 min"),
    ):
        for size in SIZES:
            units = layout_units(size, path=path, delay=delay)
            old = layout_units(size, path=path, delay=delay, inline_always=True)
            found.append(
                {
                    "path": label,
                    "body_bytes": size,
                    "placement": units.placement,
                    "largest_message_item_bytes": units.max_item_bytes,
                    "write_units": units.write,
                    "read_units": units.read,
                    "s3_requests": units.s3_put + units.s3_get,
                    "usd_per_million": dollars(units, measured),
                    "inline_write_units": old.write,
                    "inline_usd_per_million": dollars(old, measured)["total"],
                    "target_sqs_requests": target_sqs_requests(size),
                    "scheduler_usd_per_million": math.ceil(size / SCHEDULER_CHUNK) * PRICE_SCHEDULER_INVOCATION * 1e6,
                }
            )
    return found


def section(measured: Measured, *, source: str) -> Section:
    result = Section("body_cost", "3b. Cost by body size (US$ per million delivered messages)")
    table = rows(measured)
    for row in table:
        budget = BUDGETS.get(row["body_bytes"]) if row["path"] == "sweep, 1 d" else None
        total = row["usd_per_million"]["total"]
        if budget is not None:
            label = f"all-in, sweep path, 1-day delay, {_size(row['body_bytes'])} body ({row['placement']})"
            result.at_most(label, total, "US$/M", budget)
    result.at_most(
        "CloudWatch Logs: bytes the handlers write for a message on its own, at INFO",
        measured.log_bytes_lone_message,
        "B",
        LOG_BUDGET_BYTES,
        shown=f"{LOG_BUDGET_BYTES:,}",
    )
    result.check("CloudWatch Logs: bytes per message as priced (batch of 10, Lambda lines)", measured.log_bytes, "B")
    result.check(
        "US$ per million: Step Functions Standard, Wait + delivery task (≥ 2 transitions)",
        2 * PRICE_STEP_TRANSITION * 1e6,
    )
    header = [
        "path",
        "body",
        "kept",
        "WU",
        "RU",
        "S3 req",
        "DynamoDB",
        "S3",
        "SQS",
        "Lambda",
        "Logs",
        "total",
        "all inline (WU / US$)",
        "Scheduler",
        "SQS target sends",
    ]
    body = []
    for row in table:
        usd = row["usd_per_million"]
        body.append(
            [
                row["path"],
                _size(row["body_bytes"]),
                row["placement"],
                f"{row['write_units']:g}",
                f"{row['read_units']:g}",
                str(row["s3_requests"]),
                f"{usd['DynamoDB requests'] + usd['DynamoDB storage']:.2f}",
                f"{usd['S3']:.2f}",
                f"{usd['SQS']:.2f}",
                f"{usd['Lambda']:.2f}",
                f"{usd['CloudWatch Logs']:.2f}",
                f"**{usd['total']:.2f}**",
                f"{row['inline_write_units']:g} / {row['inline_usd_per_million']:.2f}",
                f"{row['scheduler_usd_per_million']:.2f}",
                str(row["target_sqs_requests"]),
            ]
        )
    result.data["table"] = {"header": header, "rows": body}
    result.data["rows"] = table
    result.data["measured"] = measured.__dict__
    result.notes += [
        f"SQS, Lambda and shared DynamoDB figures per message: {source}. Lambda at Arm's $0.0000133334/GB-s.",
        "WU/RU: the message item's writes (ingest, claim on the sweep path, start, outcome) and the due index, "
        "plus the body item (written once, read once strongly consistent, removed by TTL for free) — DynamoDB's "
        "rules applied to the items hourglass.adapters.items builds; 'all inline' is the same message with its "
        "body in the message item (the layout before issue 11).",
        "Storage: items for delay + 7 days' retention (+1 day for a body item), 100 B overhead each; an S3 body "
        "until its keep-days lifecycle rung (the message's retention; GET still returns it). "
        "S3 adds one PUT and one GET, and "
        f"{S3_PUT_SECONDS * 1000:.0f} + {S3_GET_SECONDS * 1000:.0f} ms of Lambda time (assumed, not overlapped).",
        "SQS: the timer messages carry no body (one chunk each). Delivery to an SQS target costs the target's "
        "owner one request per 64 KB chunk (last column), as with any scheduler: not in the totals. "
        "EventBridge Scheduler: $1/M per 64 KB chunk of payload; Step Functions Standard: $25/M transitions.",
    ]
    return result


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size // 1024} KB"
