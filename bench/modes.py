"""`python -m bench.modes` (`make bench-modes`): the two local modes side by side, moto + the in-process
runtime vs. MiniStack with the stack as `cdk deploy`ed; start-up, lateness, deliveries/s, ingest/s and
the atomicity of conditional writes and receives under concurrency. JSON in bench/results/modes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from bench.report import RESULTS, percentile
from devstack import api_call
from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.emulator import Emulator, free_port, quiet_emulator_logs, use_dummy_credentials
from devstack.ministack import MiniStack
from devstack.runtime import Runtime

API_KEY = "bench-modes-key"
CONTENDERS = 12
ITEMS = 25
RECEIVED = 200


@dataclass(frozen=True)
class Sizes:
    lateness: int = 100  # messages, delays spread over 3-8 s
    burst: int = 300  # messages due at once, for deliveries/s
    ingest: int = 1_000  # messages in POSTs of 10 from 8 clients (stored: due beyond the lookahead)
    posts: int = 100  # single-message POSTs one after the other, for the request latency


QUICK = Sizes(lateness=20, burst=40, ingest=100, posts=20)


@dataclass
class Running:
    name: str
    api_url: str
    api_key: str
    endpoint_url: str
    startup: float
    stop: Callable[[], None]
    steps: dict[str, float] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name="us-east-1")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return api_call.call(self.api_url, method, path, body, api_key=self.api_key, timeout=60)


def start_inprocess() -> Running:
    """`make dev` as it is: moto in its own process, the synthesized stack deployed by boto3, handlers here."""
    config = RuntimeConfig(api_port=free_port(), emulator_port=free_port(), api_key=API_KEY)
    started = time.monotonic()
    runtime = Runtime(config).start()
    assert runtime.emulator is not None
    return Running(
        "moto + in-process",
        runtime.api_url,
        API_KEY,
        runtime.emulator.endpoint_url,
        time.monotonic() - started,
        runtime.stop,
    )


def start_deployed() -> Running:
    """`make dev DEPLOY=cdk`: MiniStack, `cdk bootstrap`, `cdk deploy`; the Lambdas run in MiniStack."""
    config = RuntimeConfig(emulator_port=free_port())
    started = time.monotonic()
    stack = DeployedStack(config).start()
    return Running(
        "MiniStack, deployed",
        stack.api_url,
        stack.api_key,
        stack.endpoint_url,
        time.monotonic() - started,
        stack.stop,
        dict(stack.timings),
    )


# ------------------------------------------------------------------------------------------ figures


def measure(running: Running, sizes: Sizes) -> dict[str, Any]:
    sqs = running.client("sqs")
    figures: dict[str, Any] = {"startup_s": running.startup, "startup_steps": running.steps}
    # Cold: the first delivery and the first burst of concurrent POSTs after start-up. The deployed
    # functions start then (MiniStack forks a process per concurrent invocation); later figures are warm.
    first = _lateness(running, sqs, 1)
    figures["first_delivery_ms"] = first[0] * 1000 if first else None
    figures["ingest_cold_per_s"] = _ingest(running, 80)
    # The first run meets dispatcher processes still cold (MiniStack: one per concurrent batch); the second is measured.
    first_run = _lateness(running, sqs, sizes.lateness)
    figures["lateness_first_run_p50_ms"] = percentile(first_run, 50) * 1000
    figures["lateness_first_run_max_ms"] = max(first_run, default=float("nan")) * 1000
    lateness = _lateness(running, sqs, sizes.lateness)
    figures.update(
        lateness_p50_ms=percentile(lateness, 50) * 1000,
        lateness_p99_ms=percentile(lateness, 99) * 1000,
        lateness_max_ms=max(lateness, default=float("nan")) * 1000,
        early=sum(1 for value in lateness if value < 0),
        delivered=len(lateness),
        expected=sizes.lateness,
    )
    figures["deliveries_per_s"], figures["burst_delivered"] = _burst(running, sqs, sizes.burst)
    figures["ingest_per_s"] = _ingest(running, sizes.ingest)
    figures["post_p50_ms"], figures["post_p99_ms"] = _post_latency(running, sizes.posts)
    return figures


def _sqs_queue(running: Running, sqs: Any, label: str) -> tuple[str, str]:
    target = sqs.create_queue(QueueName=f"bench-{label}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    name = f"{label}{uuid.uuid4().hex[:8]}"
    status, doc = running.call("PUT", f"/v1/queues/{name}", {"target": {"type": "sqs", "queue_url": target}})
    assert status == 201, doc
    return name, target


def _post_all(running: Running, queue: str, messages: list[dict[str, Any]], clients: int = 4) -> dict[str, float]:
    """POST in batches of 100; returns {body: due epoch}."""
    batches = [messages[i : i + 100] for i in range(0, len(messages), 100)]

    def post(batch: list[dict[str, Any]]) -> dict[str, float]:
        status, doc = running.call("POST", f"/v1/queues/{queue}/messages", {"messages": batch})
        assert status == 201, doc
        return {m["body"]: _epoch(c["due_at"]) for m, c in zip(batch, doc["messages"], strict=True)}

    due: dict[str, float] = {}
    with ThreadPoolExecutor(clients) as pool:
        for part in pool.map(post, batches):
            due.update(part)
    return due


def _collect(sqs: Any, url: str, count: int, timeout: float) -> dict[str, float]:
    """{body: SentTimestamp epoch} of what arrives on the target queue, by 4 receivers."""
    sent: dict[str, float] = {}
    lock = threading.Lock()
    deadline = time.monotonic() + timeout

    def drain(_: int) -> None:
        client = boto3.client("sqs", endpoint_url=sqs.meta.endpoint_url, region_name="us-east-1")
        while len(sent) < count and time.monotonic() < deadline:
            got = client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"]
            )
            messages = got.get("Messages", [])
            with lock:
                for message in messages:
                    body = json.loads(message["Body"])["body"]
                    sent.setdefault(body, int(message["Attributes"]["SentTimestamp"]) / 1000)
            if messages:
                client.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(drain, range(4)))
    return sent


def _lateness(running: Running, sqs: Any, count: int) -> list[float]:
    queue, target = _sqs_queue(running, sqs, "late")
    messages = [{"body": f"m{i}", "delay": 3 + 5 * i / max(1, count - 1)} for i in range(count)]
    due = _post_all(running, queue, messages)
    sent = _collect(sqs, target, count, timeout=60)
    return [sent[body] - due[body] for body in due if body in sent]


def _burst(running: Running, sqs: Any, count: int) -> tuple[float, int]:
    """Messages due at one instant: how fast they all go out, from the due time to the last delivery."""
    queue, target = _sqs_queue(running, sqs, "burst")
    deliver_at = datetime.fromtimestamp(time.time() + 6).astimezone().isoformat()
    due = _post_all(running, queue, [{"body": f"b{i}", "deliver_at": deliver_at} for i in range(count)])
    sent = _collect(sqs, target, count, timeout=120)
    if not sent:
        return 0.0, 0
    span = max(sent.values()) - min(due.values())
    return len(sent) / max(span, 1e-3), len(sent)


def _ingest(running: Running, count: int) -> float:
    queue = f"ingest{uuid.uuid4().hex[:8]}"
    status, doc = running.call("PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}})
    assert status == 201, doc
    batches = [
        [{"body": i, "delay": 3600} for i in range(start, min(count, start + 10))] for start in range(0, count, 10)
    ]

    def post(batch: list[dict[str, Any]]) -> None:
        status, doc = running.call("POST", f"/v1/queues/{queue}/messages", {"messages": batch})
        assert status == 201, doc

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, batches))
    return count / (time.monotonic() - started)


def _post_latency(running: Running, count: int) -> tuple[float, float]:
    queue = f"posts{uuid.uuid4().hex[:8]}"
    running.call("PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}})
    took = []
    for i in range(count):
        started = time.monotonic()
        status, doc = running.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": i, "delay": 3600}]})
        took.append(time.monotonic() - started)
        assert status == 201, doc
    return percentile(took, 50) * 1000, percentile(took, 99) * 1000


# --------------------------------------------------------------------------------------- atomicity


def atomicity(endpoint: str) -> dict[str, int]:
    """Conditional updates: CONTENDERS threads race to claim each of ITEMS items (exactly one may win);
    receives: 8 receivers drain RECEIVED messages (each must reach exactly one)."""
    wins = claim_race(endpoint)
    received = receive_race(endpoint)
    return {
        "double_claims": sum(1 for item in range(ITEMS) if wins[item] > 1),
        "claims": ITEMS,
        "double_receives": sum(1 for n in received.values() if n > 1),
        "lost_receives": RECEIVED - len(received),
        "receives": RECEIVED,
    }


def claim_race(endpoint: str) -> Counter[int]:
    """CONTENDERS threads race to move each of ITEMS items from pending with one conditional update:
    the wins per item."""
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    table = f"atomic-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    for item in range(ITEMS):
        ddb.put_item(TableName=table, Item={"pk": {"S": str(item)}, "status": {"S": "pending"}})

    def claim(job: tuple[int, int]) -> tuple[int, bool]:
        item, contender = job
        try:
            ddb.update_item(
                TableName=table,
                Key={"pk": {"S": str(item)}},
                UpdateExpression="SET #st = :delivering, claimed_by = :me",
                ConditionExpression="#st = :pending",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":pending": {"S": "pending"},
                    ":delivering": {"S": "delivering"},
                    ":me": {"N": str(contender)},
                },
            )
            return item, True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return item, False

    jobs = [(item, contender) for item in range(ITEMS) for contender in range(CONTENDERS)]
    with ThreadPoolExecutor(CONTENDERS) as pool:
        return Counter(item for item, won in pool.map(claim, jobs) if won)


def receive_race(endpoint: str) -> Counter[str]:
    """8 receivers drain a queue of RECEIVED messages: how often each body was received."""
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"atomic-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "60"})[
        "QueueUrl"
    ]
    for start in range(0, RECEIVED, 10):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(start, start + 10)]
        )

    def drain(_: int) -> list[str]:
        got: list[str] = []
        while True:
            answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            if not answer.get("Messages"):
                return got
            got += [m["Body"] for m in answer["Messages"]]

    with ThreadPoolExecutor(8) as pool:
        return Counter(body for bodies in pool.map(drain, range(8)) for body in bodies)


@contextmanager
def raw_moto() -> Iterator[str]:
    """A moto server as shipped (no devstack.moto_atomic): the races the in-process runtime patches."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/data.json", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        yield endpoint
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def emulator(kind: str) -> Iterator[str]:
    if kind == "moto (as shipped)":
        with raw_moto() as endpoint:
            yield endpoint
        return
    if kind == "moto + moto_atomic":
        started: Emulator | MiniStack = Emulator.start(free_port())
    else:
        started = MiniStack.start(free_port())
    try:
        yield started.endpoint_url
    finally:
        started.stop()


# ------------------------------------------------------------------------------------------- report

ROWS = (
    ("start-up to ready", "startup_s", "s"),
    ("first delivery's lateness (cold)", "first_delivery_ms", "ms"),
    ("ingest/s, first 80 messages (cold)", "ingest_cold_per_s", "msgs/s"),
    ("lateness p50, first run (functions cold)", "lateness_first_run_p50_ms", "ms"),
    ("lateness max, first run (functions cold)", "lateness_first_run_max_ms", "ms"),
    ("lateness p50", "lateness_p50_ms", "ms"),
    ("lateness p99", "lateness_p99_ms", "ms"),
    ("lateness max", "lateness_max_ms", "ms"),
    ("early deliveries", "early", ""),
    ("deliveries/s (burst due at once)", "deliveries_per_s", "/s"),
    ("ingest/s (POSTs of 10, 8 clients, warm)", "ingest_per_s", "msgs/s"),
    ("POST of 1 message p50", "post_p50_ms", "ms"),
    ("POST of 1 message p99", "post_p99_ms", "ms"),
)


def markdown(doc: dict[str, Any]) -> str:
    modes = list(doc["modes"])
    lines = ["| figure | " + " | ".join(modes) + " |", "|---" * (len(modes) + 1) + "|"]
    for label, key, unit in ROWS:
        cells = [_fmt(doc["modes"][mode].get(key), unit) for mode in modes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for mode in modes:
        figures = doc["modes"][mode]
        if figures.get("delivered", 0) < figures.get("expected", 0):
            lines.append(f"\n{mode}: only {figures['delivered']} of {figures['expected']} delivered in time")
    lines += [
        "",
        "| conditional writes / receives under concurrency | double claims | double receives | lost |",
        "|---|---|---|---|",
    ]
    for kind, result in doc["atomicity"].items():
        lines.append(
            f"| {kind} | {result['double_claims']} of {result['claims']} items | "
            f"{result['double_receives']} of {result['receives']} | {result['lost_receives']} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "n/a"
    if not isinstance(value, float):
        return f"{value} {unit}".strip()
    return (f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}") + (f" {unit}" if unit else "")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run(sizes: Sizes, out: Path) -> dict[str, Any]:
    quiet_emulator_logs()
    use_dummy_credentials("us-east-1")
    doc: dict[str, Any] = {"sizes": sizes.__dict__, "modes": {}, "atomicity": {}}
    for start in (start_inprocess, start_deployed):
        running = start()
        try:
            print(f"bench-modes: {running.name} ready in {running.startup:.1f} s; measuring...", flush=True)
            doc["modes"][running.name] = measure(running, sizes)
        finally:
            running.stop()
    for kind in ("moto (as shipped)", "moto + moto_atomic", "MiniStack"):
        with emulator(kind) as endpoint:
            doc["atomicity"][kind] = atomicity(endpoint)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS / "modes.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HOURGLASS_LOG_LEVEL", "WARNING")  # the in-process handlers' per-message logs
    doc = run(QUICK if args.quick else Sizes(), args.out)
    args.out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    print(f"bench-modes: JSON in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
