"""Target 5, memory: peak RSS of the local runtime holding 100k pending messages, and of each Lambda
handler (a fresh process, like a Lambda instance) running one batch.

Each measurement runs in a process of its own (`python -m bench.memory runtime|handler ...`) so that
its peak RSS (VmHWM) is its own; tracemalloc adds the handler call's peak of Python
allocations. The handlers talk to a moto server in another process, so their figures hold only what
a Lambda instance would: the handler's code, boto3 and the batch.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from hourglass.adapters.timer_queue import MAX_PACK

from bench import inprocess
from bench.report import Section
from devstack.emulator import Emulator, free_port, use_dummy_credentials

RUNTIME_MESSAGES = 100_000
SWEEP_BATCH = 2_000
DISPATCH_BATCH = 10
PACK = MAX_PACK
HANDLER_BUDGET_MB = 256
RUNTIME_BUDGET_MB = 1536


def run(*, messages: int = RUNTIME_MESSAGES, sweep_batch: int = SWEEP_BATCH) -> Section:
    result = Section("memory", "5. Memory (peak RSS)")
    runtime = _child(["runtime", str(messages)])
    result.at_most(
        f"local runtime with {messages:,} pending messages",
        runtime["peak_rss_mb"],
        "MB",
        RUNTIME_BUDGET_MB,
        shown=f"{RUNTIME_BUDGET_MB:,} MB",
    )
    result.check("  local runtime started, before the messages", runtime["started_rss_mb"], "MB")
    result.check(
        "  runtime process / emulator process",
        f"{runtime['runtime_peak_rss_mb']:.0f} MB / {runtime['emulator_peak_rss_mb']:.0f} MB",
    )
    handlers = _handlers(sweep_batch)
    for name, figures in handlers.items():
        result.at_most(
            f"{name} handler, one batch ({figures['batch']})",
            figures["peak_rss_mb"],
            "MB",
            HANDLER_BUDGET_MB,
            shown=f"{HANDLER_BUDGET_MB} MB",
        )
        result.check(f"  {name}: after import / Python allocations during the batch",
                     f"{figures['imported_rss_mb']:.0f} MB / {figures['traced_peak_mb']:.1f} MB")
    result.data.update({"runtime": runtime, "handlers": handlers})
    result.notes += [
        "Peak RSS is the high-water mark (VmHWM) of a process that did only that. The local runtime's figure is its "
        "own process plus its embedded emulator's (a moto server in a process of its own, holding every item in "
        "memory), as `make dev` runs them; the 100k messages are written with BatchWriteItem over HTTP.",
        f"Handler budgets are ours (the issue sets none): half of the {512} MB the stack gives each function.",
    ]
    return result


def _child(args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "HOURGLASS_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory", *args], capture_output=True, text=True, env=env, check=False, timeout=900
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench.memory {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _handlers(sweep_batch: int) -> dict[str, dict[str, Any]]:
    use_dummy_credentials("us-east-1")
    emulator = Emulator.start(free_port())
    try:
        ddb = boto3.client("dynamodb", endpoint_url=emulator.endpoint_url, region_name="us-east-1")
        sqs = boto3.client("sqs", endpoint_url=emulator.endpoint_url, region_name="us-east-1")
        aws = inprocess.create(ddb, sqs)
        target = sqs.create_queue(QueueName="target")["QueueUrl"]
        setup = {"endpoint": emulator.endpoint_url, "table": aws.table, "timer_url": aws.timer_url, "target": target}
        return {
            name: _child(["handler", name, json.dumps({**setup, "sweep_batch": sweep_batch})])
            for name in ("ingest", "sweeper", "dispatcher")
        }
    finally:
        emulator.stop()


# --- the child processes ---------------------------------------------------------------------------


def _status_mb(field: str, pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _peak_mb() -> float:
    """The peak RSS of this process image: VmHWM (getrusage's ru_maxrss would keep the parent's peak
    from before the exec that started this one); ru_maxrss where /proc is missing."""
    peak = _status_mb("VmHWM")
    return peak if peak == peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _runtime_child(messages: int) -> dict[str, Any]:
    from hourglass.core.model import Message, Status

    from devstack.config import RuntimeConfig
    from devstack.runtime import Runtime

    runtime = Runtime(RuntimeConfig(api_port=0, emulator_port=free_port())).start()
    try:
        assert runtime.settings is not None and runtime.emulator is not None and runtime.emulator.process is not None
        emulator_pid = runtime.emulator.process.pid
        started, emulator_started = _rss_mb(), _status_mb("VmRSS", emulator_pid)
        now = datetime.now(UTC)
        body = {"pad": "x" * 64}
        later = [
            Message(f"p{i:08d}", "orders", body, Status.PENDING, now, now + timedelta(days=1, seconds=i))
            for i in range(messages)
        ]
        seeded = time.perf_counter()
        _seed(runtime.client("dynamodb"), runtime.settings.table, later, shards=runtime.settings.shards)
        seconds = time.perf_counter() - seeded
        del later
        runtime_peak, emulator_peak = _peak_mb(), _status_mb("VmHWM", emulator_pid)
        return {
            "messages": messages,
            "started_rss_mb": round(started + emulator_started, 1),
            "runtime_peak_rss_mb": round(runtime_peak, 1),
            "emulator_peak_rss_mb": round(emulator_peak, 1),
            "peak_rss_mb": round(runtime_peak + emulator_peak, 1),
            "seed_seconds": round(seconds, 1),
        }
    finally:
        runtime.stop()


def _seed(ddb: Any, table: str, messages: list[Any], *, shards: int, threads: int = 4) -> None:
    """BatchWriteItem over HTTP, as the Spark job writes, from a few threads (the emulator is another process)."""
    from concurrent.futures import ThreadPoolExecutor

    step = -(-len(messages) // threads)
    with ThreadPoolExecutor(threads) as pool:
        parts = [messages[i : i + step] for i in range(0, len(messages), step)]
        list(pool.map(lambda part: inprocess.write(ddb, table, part, shards=shards), parts))


def _handler_child(name: str, setup: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": setup["endpoint"],
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "HOURGLASS_TABLE": setup["table"],
            "HOURGLASS_TIMER_QUEUE_URL": setup["timer_url"],
            "HOURGLASS_ALLOW_PRIVATE_CALLBACKS": "1",
            "HOURGLASS_SQS_TARGETS": "target",
        }
    )
    from hourglass.handlers import api, dispatcher, sweeper

    imported = _rss_mb()
    event, handler, batch = _batch(name, setup, {"ingest": api, "sweeper": sweeper, "dispatcher": dispatcher})
    tracemalloc.start()
    answer = handler(event, None)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "batch": batch,
        "imported_rss_mb": round(imported, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
        "traced_peak_mb": round(traced_peak / 2**20, 2),
        "answer": {k: v for k, v in answer.items() if k in ("statusCode", "handed_off", "batchItemFailures")},
    }


def _batch(name: str, setup: dict[str, Any], modules: dict[str, Any]) -> tuple[dict[str, Any], Any, str]:
    """The event of one batch for `name`, after whatever it needs was prepared outside the measurement."""
    from hourglass.adapters.timer_queue import Timer, pack_to_json
    from hourglass.core import schedule
    from hourglass.core.model import Message, Status
    from hourglass.core.timestamps import to_ms

    api = modules["ingest"]
    target = {"type": "sqs", "queue_url": setup["target"]}
    api.handler({"httpMethod": "PUT", "path": "/v1/queues/orders", "body": json.dumps({"target": target})})
    now = datetime.now(UTC)
    ddb = boto3.client("dynamodb")
    if name == "ingest":
        body = {"messages": [{"body": {"n": i, "pad": "x" * 64}, "delay": 60 + i * 30} for i in range(100)]}
        event = {"httpMethod": "POST", "path": "/v1/queues/orders/messages", "body": json.dumps(body)}
        return event, api.handler, "a POST of 100 messages"
    if name == "sweeper":
        count = setup["sweep_batch"]
        soon = (
            Message(f"s{i:07d}", "orders", {"n": i}, Status.PENDING, now, now + timedelta(seconds=60 + 200 * i / count))
            for i in range(count)
        )
        inprocess.write(ddb, setup["table"], soon, shards=8)
        return {"source": "aws.events"}, modules["sweeper"].handler, f"a scheduled run handing off {count:,}"
    queue = json.loads(api.handler({"httpMethod": "GET", "path": "/v1/queues/orders"})["body"])
    epoch = datetime.fromisoformat(queue["created_at"].replace("Z", "+00:00"))
    due = [
        Message(f"d{i:07d}", "orders", {"n": i}, Status.PENDING, now, now, queue_epoch=epoch)
        for i in range(DISPATCH_BATCH * PACK)
    ]
    inprocess.write(ddb, setup["table"], due, shards=8, indexed=False)
    timers = [Timer(m.queue, m.id, m.version, to_ms(m.due_at), to_ms(now)) for m in due]
    records = [
        {"messageId": str(i), "body": pack_to_json(timers[i * PACK : (i + 1) * PACK])} for i in range(DISPATCH_BATCH)
    ]
    assert all(schedule.seconds_until(m.due_at, now) == 0 for m in due)
    return {"Records": records}, modules["dispatcher"].handler, f"{DISPATCH_BATCH} records of {PACK} timers"


def main(argv: list[str]) -> int:
    if argv[0] == "runtime":
        print(json.dumps(_runtime_child(int(argv[1]))), flush=True)
    else:
        print(json.dumps(_handler_child(argv[1], json.loads(argv[2]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
