"""Target 4, throughput: ingest (POSTs of 100), sweeper hand-offs and dispatcher deliveries, under the emulator.

In-process AWS (moto's mock_aws: no HTTP between the code and the emulator) and a fixed clock, so
nothing waits for a due time; deliveries are real HTTP POSTs to a loopback receiver. Every figure is
bounded by the emulator. Each stage is then profiled (pyinstrument) on a second, smaller run with the
thread pools run inline, so that the profiler (which samples one thread) sees all the work, and the
profile's time is split by where it was spent: Hourglass's code, the AWS SDK, the emulator, network
I/O to the HTTP target, other (the benchmark's own set-up, interpreter start-up of threads...).
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from hourglass.adapters.timer_queue import MAX_PACK, Timer, pack_to_json
from hourglass.core.model import Message, Status
from hourglass.core.timestamps import to_ms
from hourglass.service import sweep
from hourglass.service.dispatch import Dispatcher
from hourglass.service.dispatch import batch as dispatch
from hourglass.service.rest import Api, Request
from hourglass.service.sweep import Sweeper
from moto import mock_aws
from pyinstrument import Profiler

from bench import inprocess
from bench.receiver import Receiver
from bench.report import Section

NOW = datetime(2026, 11, 21, 10, 0, 15, tzinfo=UTC)
SHARDS = 8
PACK = MAX_PACK
RECORDS_PER_INVOCATION = 10
CATEGORIES = (
    ("network I/O", ("/socket.py", "/http/client.py", "/ssl.py", "/selectors.py", "/socketserver.py")),
    ("hourglass", ("/lambdas/hourglass/",)),
    ("AWS SDK", ("/botocore/", "/boto3/", "/urllib3/", "/s3transfer/", "/dateutil/", "/jmespath/")),
    ("emulator", ("/moto/", "/werkzeug/", "/responses/", "/flask/", "/xmltodict", "/py_partiql_parser/", "/jinja2/")),
    ("benchmark", ("/bench/", "/pyinstrument/")),
)


class InlinePool:
    """Stands in for ThreadPoolExecutor while profiling: `map` runs in the caller's thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        return

    def __enter__(self) -> InlinePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        return

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        return iter([fn(*args) for args in zip(*iterables, strict=True)])


def run(*, ingest_posts: int = 40, swept: int = 4000, delivered: int = 2000, profile_share: float = 0.5) -> Section:
    result = Section("throughput", "4. Throughput under the emulator (in-process moto)")
    stages = {
        "ingest: messages accepted / s (POSTs of 100)": lambda scale: _ingest(max(1, int(ingest_posts * scale))),
        "sweeper: hand-offs / s": lambda scale: _sweeper(max(10, int(swept * scale))),
        "dispatcher: deliveries / s (loopback HTTP target)": lambda scale: _dispatcher(max(10, int(delivered * scale))),
    }
    figures: dict[str, Any] = {}
    for name, stage in stages.items():
        rate = stage(1.0)(None)
        with _inline_pools():
            profiler = Profiler(interval=0.0005)
            stage(profile_share)(profiler)
        shares = _shares(profiler)
        figures[name] = {"per_second": round(rate, 1), "profile_percent": shares}
        result.check(name, rate, "/s")
        result.check(
            f"  profile: hourglass {shares['hourglass']:.0f}% | AWS SDK {shares['AWS SDK']:.0f}% | "
            f"emulator {shares['emulator']:.0f}% | network {shares['network I/O']:.0f}% | other {shares['other']:.0f}%",
            shares["hourglass"],
            "% in hourglass",
            budget="< SDK + emulator",
            passed=shares["hourglass"] < shares["AWS SDK"] + shares["emulator"],
        )
    result.data["stages"] = figures
    result.notes += [
        "Bounded by the emulator: moto runs in the same process and answers each request in milliseconds of "
        "Python; DynamoDB and SQS take a few milliseconds of network time and scale out, so these are floors, "
        "not ceilings.",
        "The profile split attributes standard-library time to the package that called it (json in hourglass "
        "counts as hourglass, deepcopy in moto as the emulator); socket and http.client time is network I/O.",
    ]
    return result


def _ingest(posts: int) -> Callable[[Profiler | None], float]:
    def measure(profiler: Profiler | None) -> float:
        with mock_aws():
            aws = _aws()
            api = Api(inprocess.context(aws, lambda: NOW, shards=SHARDS))
            api.handle(_request("PUT", "/v1/queues/orders", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}}))
            rnd = random.Random(1)
            bodies = [
                {"messages": [{"body": {"n": i, "pad": "x" * 64}, "delay": rnd.uniform(1, 3600)} for i in range(100)]}
                for _ in range(posts)
            ]
            with _profiled(profiler):
                started = time.perf_counter()
                for body in bodies:
                    response = api.handle(_request("POST", "/v1/queues/orders/messages", body))
                    assert response["statusCode"] == 201, response
                elapsed = time.perf_counter() - started
        return posts * 100 / elapsed

    return measure


def _sweeper(count: int) -> Callable[[Profiler | None], float]:
    def measure(profiler: Profiler | None) -> float:
        with mock_aws():
            aws = _aws()
            ctx = inprocess.context(aws, lambda: NOW, shards=SHARDS)
            dues = (NOW + timedelta(seconds=30 + 240 * i / count) for i in range(count))
            due = (Message(f"m{i:07d}", "orders", {"n": i}, Status.PENDING, NOW, at) for i, at in enumerate(dues))
            inprocess.write(aws.ddb, aws.table, due, shards=SHARDS)
            inprocess.reset_watermarks(aws.ddb, ctx.store, aws.table, to_ms(NOW) - 1)
            with _profiled(profiler):
                started = time.perf_counter()
                report = Sweeper(ctx).run(time_left=lambda: 1e9)
                elapsed = time.perf_counter() - started
            assert report.handed_off == count, report
        return count / elapsed

    return measure


def _dispatcher(count: int) -> Callable[[Profiler | None], float]:
    def measure(profiler: Profiler | None) -> float:
        receiver = Receiver().start()
        try:
            with mock_aws():
                aws = _aws()
                ctx = inprocess.context(aws, lambda: NOW, shards=SHARDS)
                Api(ctx).handle(_request("PUT", "/v1/queues/orders", {"target": {"type": "http", "url": receiver.url}}))
                queue = ctx.store.get_queue("orders")
                assert queue is not None
                messages = [
                    Message(f"m{i:07d}", "orders", {"n": i}, Status.PENDING, NOW, NOW, queue_epoch=queue.created_at)
                    for i in range(count)
                ]
                inprocess.write(aws.ddb, aws.table, messages, shards=SHARDS, indexed=False)
                timers = [Timer(m.queue, m.id, m.version, to_ms(m.due_at), to_ms(NOW)) for m in messages]
                records = [
                    (str(i), pack_to_json(timers[start : start + PACK]))
                    for i, start in enumerate(range(0, len(timers), PACK))
                ]
                dispatcher = Dispatcher(ctx)
                with _profiled(profiler):
                    started = time.perf_counter()
                    for start in range(0, len(records), RECORDS_PER_INVOCATION):
                        dispatcher.run_batch(records[start : start + RECORDS_PER_INVOCATION])
                    elapsed = time.perf_counter() - started
        finally:
            receiver.stop()
        return len(receiver.arrived) / elapsed

    return measure


def _aws() -> inprocess.Aws:
    region = "us-east-1"
    return inprocess.create(boto3.client("dynamodb", region_name=region), boto3.client("sqs", region_name=region))


def _request(method: str, path: str, body: Any) -> Request:
    return Request(method=method, path=path, params={}, headers={}, raw_body=json.dumps(body).encode())


@contextmanager
def _profiled(profiler: Profiler | None) -> Iterator[None]:
    if profiler is None:
        yield
        return
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()


@contextmanager
def _inline_pools() -> Iterator[None]:
    saved = sweep.ThreadPoolExecutor, dispatch.ThreadPoolExecutor
    sweep.ThreadPoolExecutor = dispatch.ThreadPoolExecutor = InlinePool  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        sweep.ThreadPoolExecutor, dispatch.ThreadPoolExecutor = saved  # type: ignore[misc]


def _shares(profiler: Profiler) -> dict[str, float]:
    """Percent of the profiled time per category; a frame without one belongs to its caller's."""
    totals: dict[str, float] = defaultdict(float)
    session = profiler.last_session
    root = session.root_frame() if session else None
    stack: list[tuple[Any, str]] = [(root, "other")] if root else []
    while stack:
        frame, inherited = stack.pop()
        category = _category(frame.file_path or "", inherited)
        own = frame.time - sum(child.time for child in frame.children)
        totals[category] += max(0.0, own)
        stack.extend((child, category) for child in frame.children)
    whole = sum(totals.values()) or 1.0
    return {name: round(100 * totals.get(name, 0.0) / whole, 1) for name in [*(c for c, _ in CATEGORIES), "other"]}


def _category(path: str, inherited: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in path for marker in markers):
            return name
    return inherited
