"""Target 1, precision: lateness end to end through the local runtime, HTTP and SQS targets at once.

Messages go in through the REST API in POSTs of 100 with delays spread uniformly over 1-120 s, so
the short ones are handed to the timer queue at ingest and the rest wait for the sweeper (short
interval and look-ahead). Lateness = when the target got the message - its due time:
- HTTP: the loopback receiver's clock when the request's headers arrived;
- SQS: the target message's SentTimestamp, the emulator's clock (ms) when it accepted SendMessage.
Both clocks are this machine's wall clock, which is also what due times are computed from.
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bench.receiver import Receiver
from bench.report import Section, percentile
from bench.runtime_meter import RuntimeMeter
from devstack.api_call import document
from devstack.config import RuntimeConfig
from devstack.emulator import free_port
from devstack.runtime import Runtime

P99_BUDGET = 0.200
MAX_BUDGET = 1.0
BATCH = 100


@dataclass(frozen=True)
class PrecisionConfig:
    per_target: int = 1200
    min_delay: float = 1.0
    max_delay: float = 120.0
    post_window: float = 20.0
    sweep_interval: float = 2.0
    lookahead: float = 10.0
    handoff_safety: float = 1.0
    shards: int = 4
    dispatcher_threads: int = 8
    settle: float = 4.0
    seed: int = 20261121
    # Busy processes (a CPU hog each) beside the run, and the lateness budgets it is judged by.
    hogs: int = 0
    p99_budget: float = P99_BUDGET
    max_budget: float = MAX_BUDGET


@dataclass
class Posted:
    queue: str
    due: float
    path: str = "?"


@dataclass
class Run:
    """Everything the cost target needs from the precision run."""

    config: PrecisionConfig
    meter: RuntimeMeter
    baseline: dict[str, Any]
    final: dict[str, Any]
    posted: dict[str, Posted]
    posts: int
    delivered: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


class Timing(Protocol):
    """The sweep settings a real-time lateness target runs the local runtime with."""

    @property
    def sweep_interval(self) -> float: ...
    @property
    def lookahead(self) -> float: ...
    @property
    def handoff_safety(self) -> float: ...
    @property
    def shards(self) -> int: ...


@contextmanager
def local_runtime(timing: Timing, dispatcher_threads: int) -> Iterator[tuple[Runtime, Receiver]]:
    """The local runtime, started with `timing`, and a loopback receiver; both stopped after."""
    runtime = Runtime(
        RuntimeConfig(
            api_port=0,
            emulator_port=free_port(),
            sweep_interval=timing.sweep_interval,
            lookahead=timing.lookahead,
            handoff_safety=timing.handoff_safety,
            shards=timing.shards,
            dispatcher_threads=dispatcher_threads,
            allow_private_callbacks=True,
        )
    )
    receiver = Receiver().start()
    try:
        runtime.start()
        yield runtime, receiver
    finally:
        runtime.stop()
        receiver.stop()


def run(config: PrecisionConfig) -> tuple[Section, Run]:
    with local_runtime(config, config.dispatcher_threads) as (runtime, receiver), cpu_hogs(config.hogs):
        gc.freeze()  # what start-up built (the synthesized stack, SDK models) is not scanned again
        try:
            return _measure(config, runtime, receiver)
        finally:
            gc.unfreeze()


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """`count` processes that each keep a core busy for as long as the block runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _measure(config: PrecisionConfig, runtime: Runtime, receiver: Receiver) -> tuple[Section, Run]:
    assert runtime.emulator is not None
    emulator = runtime.emulator
    meter = RuntimeMeter(runtime).attach()
    sqs = runtime.client("sqs")
    target_url = sqs.create_queue(QueueName="bench-target")["QueueUrl"]
    document(runtime.api_url, "PUT", "/v1/queues/http", {"target": {"type": "http", "url": receiver.url}})
    document(runtime.api_url, "PUT", "/v1/queues/sqs", {"target": {"type": "sqs", "queue_url": target_url}})
    baseline = meter.counts()
    cpu_before, emulator_before = _cpu(), emulator.cpu_seconds()
    started = time.time()
    sent: dict[str, float] = {}
    stop = threading.Event()
    drainer = threading.Thread(target=_drain, args=(sqs, target_url, sent, stop), daemon=True)
    drainer.start()
    posted, posts = _post(config, runtime.api_url)
    last_due = max(p.due for p in posted.values())
    while time.time() < last_due + config.settle and len(receiver.arrived) + len(sent) < len(posted):
        time.sleep(0.5)
    stop.set()
    drainer.join()
    _drain_once(sqs, target_url, sent)
    for key, indexed in meter.capacity.indexed_at_ingest.items():
        if key[1][2:] in posted:
            posted[key[1][2:]].path = "swept" if indexed else "hand-off"
    final = meter.counts()
    arrived = {"http": receiver.arrived, "sqs": sent}
    section = _section(config, posted, arrived, receiver.duplicates)
    section.data["worst"] = sorted(
        ((round(arrived[p.queue][i] - p.due, 3), p.queue, p.path, round(p.due - started, 1)) for i, p in posted.items()
         if i in arrived[p.queue]), reverse=True)[:15]
    section.data["environment"] = {
        "runtime_cpu_seconds": round(_cpu() - cpu_before, 1),
        "emulator_cpu_seconds": round(emulator.cpu_seconds() - emulator_before, 1),
        "wall_seconds": round(time.time() - started, 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
    }
    delivered = sum(1 for i, p in posted.items() if i in arrived[p.queue])
    record = Run(config, meter, baseline, final, posted, posts, delivered, time.time() - started)
    return section, record


def _post(config: PrecisionConfig, api_url: str) -> tuple[dict[str, Posted], int]:
    rnd = random.Random(config.seed)
    posted: dict[str, Posted] = {}
    size = min(BATCH, config.per_target)
    rounds = max(1, config.per_target // size)
    begin = time.time()
    posts = 0
    for round_no in range(rounds):
        for queue in ("http", "sqs"):
            delays = [round(rnd.uniform(config.min_delay, config.max_delay), 3) for _ in range(size)]
            doc = document(api_url, "POST", f"/v1/queues/{queue}/messages", {"messages": [
                {"body": {"n": i, "pad": "x" * 64}, "delay": d} for i, d in enumerate(delays)
            ]})
            posts += 1
            for created in doc["messages"]:
                due = datetime.fromisoformat(created["due_at"].replace("Z", "+00:00")).timestamp()
                posted[created["id"]] = Posted(queue, due)
        time.sleep(max(0.0, begin + config.post_window * (round_no + 1) / rounds - time.time()))
    return posted, posts


def _drain(sqs: Any, url: str, sent: dict[str, float], stop: threading.Event) -> None:
    """Keeps the target queue short (the emulator slows down with long queues); SentTimestamp is kept."""
    while not stop.wait(2.0):
        _drain_once(sqs, url, sent)


def _drain_once(sqs: Any, url: str, sent: dict[str, float]) -> None:
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["SentTimestamp"])
        messages = got.get("Messages", [])
        if not messages:
            return
        for m in messages:
            message_id = json.loads(m["Body"])["id"]
            sent.setdefault(message_id, int(m["Attributes"]["SentTimestamp"]) / 1000)
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        sqs.delete_message_batch(QueueUrl=url, Entries=entries)


def _section(
    config: PrecisionConfig, posted: dict[str, Posted], arrived: dict[str, dict[str, float]], duplicates: int
) -> Section:
    section = Section("precision", "1. Precision: lateness end to end (local runtime)")
    figures: dict[str, Any] = {}
    for target in ("http", "sqs"):
        mine = {i: p for i, p in posted.items() if p.queue == target}
        late = [arrived[target][i] - p.due for i, p in mine.items() if i in arrived[target]]
        label = target.upper()
        budgets = (config.p99_budget, config.max_budget)
        figures[target] = check_lateness(section, label, late, len(mine), budgets=budgets)
        paths = {}
        for path in ("hand-off", "swept"):
            on_path = [arrived[target][i] - p.due for i, p in mine.items() if p.path == path and i in arrived[target]]
            paths[path] = _stats(on_path)
            section.check(f"{label} {path}: p99 lateness (n={len(on_path)})", percentile(on_path, 99) * 1000, "ms")
        figures[target]["by_path"] = paths
    section.data.update({"config": config.__dict__, "targets": figures, "duplicate_http_deliveries": duplicates})
    section.notes += [
        f"{2 * config.per_target:,} messages, {config.per_target:,} per target, POSTs of up to {BATCH} spread over "
        f"{config.post_window:g} s; delays uniform over {config.min_delay:g}-{config.max_delay:g} s.",
        f"Sweep every {config.sweep_interval:g} s, look-ahead {config.lookahead:g} s, hand-off safety "
        f"{config.handoff_safety:g} s: delays up to {config.lookahead + config.handoff_safety:g} s are handed off at "
        "ingest, the rest by the sweeper.",
        "HTTP lateness: the loopback receiver's clock when the request arrived. SQS lateness: SentTimestamp of the "
        "target message (the emulator's clock, ms, when it accepted SendMessage), not when a consumer polled it.",
        "The emulator (moto server) runs in its own process; its latency under load is part of what is measured.",
    ]
    return section


def check_lateness(
    section: Section,
    label: str,
    late: list[float],
    expected: int,
    *,
    judged: bool = True,
    budgets: tuple[float, float] = (P99_BUDGET, MAX_BUDGET),
) -> dict[str, Any]:
    """The delivered, early and lateness checks of `late` (seconds, of `expected` messages), against the
    `budgets` (p99, max) when `judged`; returns its figures."""
    missing = expected - len(late)
    early = sum(1 for x in late if x < 0)
    p99, worst = percentile(late, 99), max(late, default=float("nan"))
    section.check(f"{label}: delivered", len(late), f"of {expected:,}", budget="all", passed=missing == 0)
    section.check(f"{label}: early deliveries", early, budget="0", passed=early == 0)
    p99_budget, max_budget = (f"≤ {budgets[0] * 1000:g} ms", f"≤ {budgets[1] * 1000:g} ms") if judged else ("", "")
    p99_ok, max_ok = (p99 <= budgets[0], worst <= budgets[1]) if judged else (None, None)
    section.check(f"{label}: p99 lateness", p99 * 1000, "ms", budget=p99_budget, passed=p99_ok)
    section.check(f"{label}: max lateness", worst * 1000, "ms", budget=max_budget, passed=max_ok)
    section.check(f"{label}: p50 lateness", percentile(late, 50) * 1000, "ms")
    return {**_stats(late), "missing": missing, "early": early}


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 1),
        "p99_ms": round(percentile(values, 99) * 1000, 1),
        "max_ms": round(max(values, default=float("nan")) * 1000, 1),
        "min_ms": round(min(values, default=float("nan")) * 1000, 1),
    }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
