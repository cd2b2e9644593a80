"""Target 2, sweep cost follows what is due: items a sweep reads per due message, whatever waits for later.

In-process AWS (moto's mock_aws) and a fixed clock. The same 500 messages are due in the sweep's
window while 1k, 10k and 100k others wait for later; items read are counted from every DynamoDB
answer (ScannedCount of each Query and Scan, each item a GetItem returned). Measured in the same run
for two reference designs that are not Hourglass (bench.reference_sweepers): a Scan with a filter
over the same table, and a due index that is not sparse, emulated by a table where the N others are
delivered messages that kept their index keys in the due buckets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from hourglass.core import schedule
from hourglass.core.model import Message, Status
from hourglass.core.timestamps import to_ms
from hourglass.service.sweep import Sweeper
from moto import mock_aws

from bench import inprocess, reference_sweepers
from bench.report import Section

SIZES = (1_000, 10_000, 100_000)
DUE = 500
SHARDS = 8
BUCKET_SECONDS = 60
# A window inside one bucket: each design makes one query per shard (moto's answer time grows with the
# table, DynamoDB's does not).
SWEEP_INTERVAL = 10.0
LOOKAHEAD = 40.0
WINDOW = LOOKAHEAD - 2
NOW = datetime(2026, 11, 21, 10, 0, 10, tzinfo=UTC)
READ_BUDGET = 1.1
SPREAD_BUDGET = 0.10


class ItemsRead:
    """Counts the items DynamoDB read to answer each request made through one client."""

    def __init__(self, client: Any) -> None:
        self.items = 0
        client.meta.events.register("after-call.dynamodb", self._count)

    def _count(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name in ("Query", "Scan"):
            self.items += int(parsed.get("ScannedCount", 0))
        elif model.name == "GetItem":
            self.items += 1 if "Item" in parsed else 0
        elif model.name == "BatchGetItem":
            self.items += sum(len(v) for v in parsed.get("Responses", {}).values())

    def take(self) -> int:
        items, self.items = self.items, 0
        return items


def run(sizes: Iterable[int] = SIZES, due: int = DUE) -> Section:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        aws = inprocess.create(ddb, sqs)
        sparse, dense = aws.table, inprocess.create_table(ddb, "dense", ("version", "status"))
        ctx = inprocess.context(aws, lambda: NOW, shards=SHARDS, lookahead=LOOKAHEAD, sweep_interval=SWEEP_INTERVAL)
        reads = ItemsRead(ddb)
        low, high = to_ms(NOW) - 1, schedule.main_sweep_end(NOW, LOOKAHEAD)
        due_now = [_message(f"due{i:06d}", NOW + timedelta(seconds=1 + WINDOW * i / due)) for i in range(due)]
        inprocess.write(ddb, dense, due_now, shards=SHARDS)
        rows = []
        waiting = 0
        for size in sizes:
            later = (_message(f"later{i:07d}", NOW + timedelta(days=30, seconds=i)) for i in range(waiting, size))
            inprocess.write(ddb, sparse, later, shards=SHARDS)
            spread = (NOW + timedelta(seconds=1 + WINDOW * i / size) for i in range(waiting, size))
            done = (_delivered(f"done{i:07d}", due) for i, due in enumerate(spread, start=waiting))
            inprocess.write(ddb, dense, done, shards=SHARDS)
            waiting = size
            inprocess.write(ddb, sparse, due_now, shards=SHARDS)  # fresh: no claims left from the last size
            inprocess.reset_watermarks(ddb, ctx.store, sparse, low)
            reads.take()
            started = time.perf_counter()
            report = Sweeper(ctx).run()
            sweep_seconds = time.perf_counter() - started
            hourglass = reads.take()
            found_scan = reference_sweepers.scan_sweep(ddb, sparse, low, high)
            scanned = reads.take()
            found_dense = reference_sweepers.dense_index_sweep(
                ddb, dense, low, high, shards=SHARDS, bucket_seconds=BUCKET_SECONDS
            )
            dense_read = reads.take()
            expected = {m.id for m in due_now}
            rows.append(
                {
                    "waiting": size,
                    "due": due,
                    "hourglass_items_read": hourglass,
                    "hourglass_handed_off": report.handed_off,
                    "hourglass_seconds": round(sweep_seconds, 2),
                    "scan_items_read": scanned,
                    "scan_found": len(set(found_scan) & expected),
                    "dense_items_read": dense_read,
                    "dense_found": len(set(found_dense) & expected),
                }
            )
    return _section(rows, due)


def _section(rows: list[dict[str, Any]], due: int) -> Section:
    result = Section("sweep_scaling", "2. Sweep cost follows what is due (items read per due message)")
    per_due = [r["hourglass_items_read"] / due for r in rows]
    for row, ratio in zip(rows, per_due, strict=True):
        n = f"{row['waiting']:,} waiting"
        result.check(
            f"Hourglass (sparse index), {n}: items read per due",
            ratio,
            budget=f"≈ 1 (≤ {READ_BUDGET:g})",
            passed=ratio <= READ_BUDGET and row["hourglass_handed_off"] == due,
        )
    spread = max(per_due) / min(per_due) - 1 if per_due and min(per_due) > 0 else float("nan")
    result.check("Hourglass: spread across sizes", spread * 100, "%", budget="≤ 10%", passed=spread <= SPREAD_BUDGET)
    for row, ratio in zip(rows, per_due, strict=True):
        n = f"{row['waiting']:,}"
        scan, dense = row["scan_items_read"] / due, row["dense_items_read"] / due
        result.check(f"reference, Scan + filter, {n}: items read per due", f"{scan:,.1f} ({scan / ratio:,.0f}x)")
        result.check(
            f"reference, non-sparse index, {n}: items read per due", f"{dense:,.1f} ({dense / ratio:,.0f}x)"
        )
    found = all(r["scan_found"] == due and r["dense_found"] == due for r in rows)
    result.check("every design found the same due messages", "yes" if found else "no", passed=found)
    result.data["rows"] = rows
    result.notes += [
        f"{due} messages due in the window; the others wait 30 days out (Hourglass, Scan) or are delivered messages "
        "that kept their keys in the window's buckets (non-sparse index reference).",
        "Items read = ScannedCount of every Query/Scan plus items returned by GetItem: what DynamoDB reads, before "
        "any filter. Hourglass's figure includes its sweeper-state read (1 item per run).",
        "The reference designs are in bench/reference_sweepers.py and are not part of Hourglass.",
    ]
    return result


def _message(message_id: str, due: datetime) -> Message:
    return Message(
        id=message_id, queue="orders", body={"n": message_id}, status=Status.PENDING, created_at=NOW, due_at=due
    )


def _delivered(message_id: str, due: datetime) -> Message:
    return Message(
        id=message_id, queue="orders", body={"n": message_id}, status=Status.DELIVERED, created_at=NOW, due_at=due,
        version=3, attempts=1, delivered_at=due,
    )
