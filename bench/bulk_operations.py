"""Bulk-operation throughput on the local emulator (moto in a process of its own, as `make dev` runs it):
N messages written straight into the table, one operation over all of them, its fan-out invocations as threads.

`python -m bench.bulk_operations [N] [cancel|shift|redeliver]` prints one JSON line: matched, applied,
seconds, msgs/s, and the CPU seconds the emulator and this process spent per 1,000 messages (the
figures that do not depend on how busy the host is).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config
from hourglass.adapters.aws import AWS_CONFIG
from hourglass.core.ids import new_id
from hourglass.core.model import HttpTarget, Message, Queue, QueueSettings, Status
from hourglass.service.operations import Operations

from bench import inprocess
from bench.report import Section
from devstack.emulator import Emulator, free_port, use_dummy_credentials

QUEUE = "bulk"
# All fan-out invocations run as threads of this one process, sharing its clients: one connection each.
CONFIG = AWS_CONFIG.merge(Config(max_pool_connections=96))


def run(messages: int = 100_000, action: str = "cancel") -> dict[str, Any]:
    use_dummy_credentials("us-east-1")
    server = Emulator.start(free_port())  # a process of its own, as `make dev` runs it
    try:
        endpoint = server.endpoint_url
        ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", config=CONFIG)
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", config=CONFIG)
        aws = inprocess.create(ddb, sqs)
        now = datetime.now(UTC)
        ctx = inprocess.context(aws, lambda: datetime.now(UTC))
        ctx.store.put_queue(_queue(now))
        due = now + timedelta(hours=1)
        status = Status.FAILED if action == "redeliver" else Status.PENDING
        loaded = time.monotonic()
        inprocess.write(
            ddb,
            aws.table,
            (
                Message(id=new_id(), queue=QUEUE, body={"n": i}, status=status, created_at=now, due_at=due)
                for i in range(messages)
            ),
            shards=16,
            indexed=status is Status.PENDING,
        )
        load_seconds = time.monotonic() - loaded
        threads: list[threading.Thread] = []

        def invoke(event: dict[str, Any]) -> None:
            thread = threading.Thread(target=lambda: ops.work(event, lambda: 600.0), daemon=True)
            threads.append(thread)
            thread.start()

        ops = Operations(ctx, invoke=invoke)
        started, cpu, emulator_cpu = time.monotonic(), time.process_time(), server.cpu_seconds()
        operation = ops.start(QUEUE, {"action": action} | ({"seconds": 60} if action == "shift" else {}))
        while True:
            done = ops.get(QUEUE, operation.id)
            if done.status.value != "running":
                break
            time.sleep(0.5)
        seconds = time.monotonic() - started
        per_thousand = 1000 / max(1, done.progress.applied)
        return {
            "messages": messages,
            "action": action,
            "status": done.status.value,
            "matched": done.progress.matched,
            "applied": done.progress.applied,
            "seconds": round(seconds, 1),
            "msgs_per_second": round(done.progress.applied / seconds, 1),
            "emulator_cpu_per_1000": round((server.cpu_seconds() - emulator_cpu) * per_thousand, 2),
            "workers_cpu_per_1000": round((time.process_time() - cpu) * per_thousand, 2),
            "load_seconds": round(load_seconds, 1),
        }
    finally:
        server.stop()


def section(*, quick: bool = False) -> Section:
    """The `make bench` target: one bulk cancel over 10,000 pending messages (300 when quick)."""
    size = 300 if quick else 10_000
    result = run(size, "cancel")
    out = Section("bulk_operations", "Bulk operations: one cancel over every pending message of a queue")
    everything = result["matched"] == result["applied"] == size and result["status"] == "succeeded"
    applied = f"{result['matched']:,} / {result['applied']:,}"
    out.check("matched / applied", applied, budget=f"all {size:,}", passed=everything)
    out.check("throughput", result["msgs_per_second"], "msgs/s")
    out.check("100,000 messages at this rate", round(100_000 / max(result["msgs_per_second"], 0.1) / 60, 1), "min")
    out.check("emulator CPU per 1,000 messages", result["emulator_cpu_per_1000"], "s")
    out.check("workers' CPU per 1,000 messages", result["workers_cpu_per_1000"], "s")
    out.notes.append(
        "Messages written straight into the table; the operation fans out as threads of this process against "
        "the emulator in a process of its own, each message its own conditional write. "
        "`python -m bench.bulk_operations 100000` runs the 100,000 case (~10 minutes on 2 quiet cores)."
    )
    out.data.update(result)
    return out


def _queue(now: datetime) -> Queue:
    return Queue(QUEUE, QueueSettings(target=HttpTarget(url="http://127.0.0.1:9/")), created_at=now)


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(json.dumps(run(size, sys.argv[2] if len(sys.argv) > 2 else "cancel")), flush=True)
