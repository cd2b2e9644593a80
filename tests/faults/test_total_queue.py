"""A Jepsen-style total-queue check: thousands of messages through the local runtime while faults are
injected; every acknowledged message must come out, nothing else may, and nothing early or after a cancel."""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack import liveness
from devstack.emulator import free_port
from devstack.liveness import Liveness
from tests.faults.callback import Callback, Request
from tests.faults.processes import LocalRuntime

FAST = {
    "HOURGLASS_SWEEP_INTERVAL": "1",
    "HOURGLASS_LOOKAHEAD": "4",
    # longer than a POST takes here, or a sweep could pass a due time before its write lands
    "HOURGLASS_HANDOFF_SAFETY": "3",
    "HOURGLASS_POLL_VISIBILITY": "6",
    "HOURGLASS_DISPATCHER_WORKERS": "6",
    # moto answers a due-index query by scanning the whole table: one shard keeps the emulator's cost down
    "HOURGLASS_SHARDS": "1",
    # HOURGLASS_TOTAL_QUEUE_LOG_LEVEL=INFO keeps every event of a run in its runtime log, to explain one
    "HOURGLASS_LOG_LEVEL": os.environ.get("HOURGLASS_TOTAL_QUEUE_LOG_LEVEL", "WARNING"),
}
# Faults whose recovery the design bounds to seconds. Failed sends at ingest or of a retry's timer, and
# process kills between a claim and its send, wait for the recovery sweep (minutes): the soak covers them.
QUICK_ODDS = {
    "seed": 7,
    "throttle": 0.02,
    "sweep_send_fails": 0.05,
    "sweep_entry_fails": 0.03,
    "crash_before_post": 0.004,
    "crash_after_post": 0.004,
    # the dedup transactions (1 message in 50) are often throttled: retried, or a 503 the client retries
    "transact_throttled": 0.3,
    "connection_errors": 0.005,
    "client_connection_errors": 0.001,
}
# Writes that land while their caller sees a read timeout, and the sweeper's calls failing past botocore's
# retries: a claim may then wait for the recovery sweep.
SOAK_ODDS = {
    **QUICK_ODDS,
    "any_send_fails": 0.01,
    "sweeper_connection_errors": 0.002,
    "client_timeouts_after_commit": 0.001,
}
REPORTS: list[str] = []
FINAL = ("delivered", "failed", "cancelled", "expired")


@dataclass
class Plan:
    """What the client did: its acknowledged messages, cancels and what each callback script expects."""

    due: dict[str, float] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)
    cancelled_at: dict[str, float] = field(default_factory=dict)
    cancel_refused: set[str] = field(default_factory=set)
    indeterminate: set[int] = field(default_factory=set)  # bodies of POSTs that got no 201


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def script(rng: random.Random) -> tuple[dict[str, Any], str]:
    """A callback behaviour and the outcome it leads to."""
    roll = rng.random()
    if roll < 0.08:
        return {"answers": [503]}, "delivered"
    if roll < 0.11:
        return {"answers": [429, 500]}, "delivered"
    if roll < 0.14:
        return {"answers": [404]}, "failed"
    if roll < 0.16:
        return {"answers": [500, 500, 500]}, "failed"
    if roll < 0.19:
        return {"hold": 0.3}, "delivered"
    return {}, "delivered"


def delay(rng: random.Random, horizon: float) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.1:
        return {}
    if roll < 0.45:
        return {"delay": round(rng.uniform(0, 4), 3)}
    if roll < 0.9:
        return {"delay": round(rng.uniform(4, horizon), 3)}
    at = datetime.now(UTC) + timedelta(seconds=rng.uniform(5, horizon))
    return {"deliver_at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z")}


def schedule(
    runtime: LocalRuntime, queue: str, count: int, horizon: float, rng: random.Random, plan: Plan | None = None
) -> Plan:
    plan = plan or Plan()
    first = len(plan.due) + len(plan.indeterminate)
    for start in range(first, first + count, 100):
        batch, outcomes = [], []
        for n in range(start, min(first + count, start + 100)):
            behaviour, outcome = script(rng)
            # A few carry a dedup id (moto copies the whole table for each transaction they cost).
            dedup = {"dedup_id": f"m{n}"} if n % 50 == 0 else {}
            batch.append({"body": {"n": n, **behaviour}, **dedup, **delay(rng, horizon)})
            outcomes.append(outcome)
        for _ in range(10):  # a refused or cut-off POST is retried; what it may have stored is indeterminate
            status, doc = runtime.call("POST", f"/v1/queues/{queue}/messages", {"messages": batch})
            if status == 201:
                break
            plan.indeterminate.update(m["body"]["n"] for m in batch)
            time.sleep(0.5)
        assert status == 201, doc
        for created, outcome in zip(doc["messages"], outcomes, strict=True):
            plan.due[created["id"]] = epoch(created["due_at"])
            plan.outcome[created["id"]] = outcome
        cancel_some(runtime, queue, plan, [m["id"] for m in doc["messages"]], rng)
    return plan


def cancel_some(runtime: LocalRuntime, queue: str, plan: Plan, ids: list[str], rng: random.Random) -> None:
    for message_id in rng.sample(ids, k=len(ids) // 10):
        # A 503 may hide a cancel that landed: asked again, a cancelled message answers 204.
        status, _ = steady(runtime, "DELETE", f"/v1/queues/{queue}/messages/{message_id}")
        if status == 204:
            plan.cancelled_at[message_id] = time.time()
        elif status == 409:
            plan.cancel_refused.add(message_id)


def steady(runtime: LocalRuntime, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The call, asked again while it answers 5xx or nothing (injected connection errors reach the API)."""
    for _ in range(20):
        status, doc = runtime.call(method, path, body)
        if 0 < status < 500:
            break
        time.sleep(0.2)
    return status, doc


def drain(runtime: LocalRuntime, callback: Callback, queue: str, plan: Plan, timeout: float) -> dict[str, str]:
    """Waits until every message that should be delivered was, every failing one was tried and every
    acknowledged one is in a final state; returns the final statuses."""
    wanted = {i for i, o in plan.outcome.items() if o == "delivered" and i not in plan.cancelled_at}
    tried = {i for i, o in plan.outcome.items() if o == "failed" and i not in plan.cancelled_at}
    deadline = time.monotonic() + timeout
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        time.sleep(1)
        if wanted - callback.succeeded() or tried - {r.id for r in callback.snapshot()}:
            continue
        statuses = final_statuses(runtime, queue)
        if all(statuses.get(i) in FINAL for i in plan.due):
            break
    time.sleep(2)  # let late duplicates land
    return final_statuses(runtime, queue)


@dataclass
class Verdict:
    scheduled: int
    lost: list[str]
    unexpected: list[str]
    duplicated: int
    lateness: list[float]

    def line(self, faults: dict[str, float], elapsed: float) -> str:
        ordered = sorted(self.lateness) or [0.0]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        injected = ", ".join(f"{k} {int(v)}" for k, v in sorted(faults.items()) if v and k[0].islower())
        return (
            f"total queue: {self.scheduled} scheduled in {elapsed:.0f} s; lost {len(self.lost)}, "
            f"unexpected {len(self.unexpected)}, duplicated {self.duplicated} "
            f"(redelivered after a takeover {int(faults.get('Redelivered', 0))}); StuckDelivering "
            f"{int(faults.get('StuckDelivering', 0))}, DeadLetterTimers {int(faults.get('DeadLetterTimers', 0))}; "
            f"lateness p50 "
            f"{statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms; "
            f"faults injected: {injected}"
        )


def came_out(outcome: str, got: list[Request], status: str | None) -> bool:
    if outcome == "delivered":
        return status == "delivered" and any(200 <= r.status < 300 for r in got)
    # A dispatcher that died after the failing answer makes the next attempt's answer the one that counts.
    return bool(got) and status in ("failed", "delivered")


def judge(plan: Plan, requests: list[Request], statuses: dict[str, str]) -> Verdict:
    by_id: dict[str, list[Request]] = {}
    for request in requests:
        by_id.setdefault(request.id, []).append(request)
    unexpected = [r.id for r in requests if r.id not in plan.due and r.body["n"] not in plan.indeterminate]
    unexpected += [r.id for r in requests if r.id in plan.due and r.at < plan.due[r.id]]
    unexpected += [r.id for r in requests if r.at > plan.cancelled_at.get(r.id, float("inf"))]
    lost = []
    for message_id, outcome in plan.outcome.items():
        got = by_id.get(message_id, [])
        if message_id in plan.cancelled_at:
            if statuses.get(message_id) != "cancelled":
                unexpected.append(message_id)
        elif not came_out(outcome, got, statuses.get(message_id)):
            lost.append(message_id)
    successes = Counter(r.id for r in requests if 200 <= r.status < 300)
    duplicated = sum(count - 1 for count in successes.values())
    first = {i: min(r.at for r in got) - plan.due[i] for i, got in by_id.items() if i in plan.due}
    return Verdict(len(plan.due), lost, unexpected, duplicated, list(first.values()))


def final_statuses(runtime: LocalRuntime, queue: str) -> dict[str, str]:
    statuses: dict[str, str] = {}
    cursor = None
    while True:
        suffix = f"&cursor={cursor}" if cursor else ""
        status, page = steady(runtime, "GET", f"/v1/queues/{queue}/messages?limit=1000{suffix}")
        assert status == 200, page
        statuses.update({m["id"]: m["status"] for m in page["messages"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return statuses


def faults_of(path: Path) -> dict[str, float]:
    return dict(json.loads(path.read_text())) if path.exists() else {}


def liveness_of(endpoint: str, tmp_path: Path, queue: str) -> Liveness:
    """After the run: every message ended or has a way forward. A delivering one past its lease counts as
    live only if its timer is in the timer queue or its DLQ, read once the crashed batches' timers are
    visible again."""
    where = json.loads((tmp_path / "faults.where.json").read_text())
    ddb = boto3.client("dynamodb", endpoint_url=endpoint)
    found = liveness.check(ddb, where["table"], datetime.now(UTC), queues=[queue])
    if found.ok:
        return found
    time.sleep(int(FAST["HOURGLASS_POLL_VISIBILITY"]) + 1)
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    # a timer in the DLQ has a way forward too: its consumer fails the message with a reason
    timers = {i for url in where["timer_queues"] if url for i in liveness.timer_ids(sqs, url)}
    found = liveness.check(ddb, where["table"], datetime.now(UTC), timers=timers, queues=[queue])
    if not found.ok:  # what is left to explain it: the queues' hidden and delayed counts, the items
        names = ["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
        for url in filter(None, where["timer_queues"]):
            counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
            REPORTS.append(f"liveness: {url.rsplit('/', 1)[-1]} {counts}")
        explain(endpoint, tmp_path, queue, [entry.split(" ")[0].split("/", 1)[1] for entry in found.stuck], "stuck")
    return found


def explain(endpoint: str, tmp_path: Path, queue: str, ids: list[str], why: str) -> None:
    """The stored items (without bodies) of a few messages that did not come out, for the report."""
    table = json.loads((tmp_path / "faults.where.json").read_text())["table"]
    ddb = boto3.client("dynamodb", endpoint_url=endpoint)
    for message_id in ids[:5]:
        key = {"pk": {"S": queue}, "sk": {"S": f"m#{message_id}"}}
        item = ddb.get_item(TableName=table, Key=key).get("Item", {})
        REPORTS.append(f"{why} {message_id}: " + json.dumps({k: item[k] for k in sorted(item) if k != "body"}))
        # What the runtime logged about it (WARNING and up unless HOURGLASS_TOTAL_QUEUE_LOG_LEVEL says more).
        logged = [line for log in sorted(tmp_path.glob("runtime-*.log")) for line in log.read_text().splitlines()]
        REPORTS.extend(f"  {line[:400]}" for line in [x for x in logged if message_id in x][:10])


def chaos_runtime(endpoint: str, tmp_path: Path, odds: dict[str, Any]) -> LocalRuntime:
    env = {**FAST, "HOURGLASS_CHAOS": json.dumps(odds), "HOURGLASS_CHAOS_STATS": str(tmp_path / "faults.json")}
    return LocalRuntime(endpoint, free_port(), tmp_path, env=env, module="tests.faults.chaos")


@pytest.mark.slow  # 2,000 messages in real time (1-2 minutes): `make test-slow`, `make total-queue`
def test_total_queue_under_faults(moto_endpoint: str, tmp_path: Path, callback: Callback) -> None:
    runtime = chaos_runtime(moto_endpoint, tmp_path, QUICK_ODDS).start()
    started = time.monotonic()
    try:
        status, _ = steady(
            runtime,
            "PUT",
            "/v1/queues/total",
            {"target": {"type": "http", "url": callback.url}, "retry": {"max_attempts": 4, "backoff_base": 0.5}},
        )
        assert status in (200, 201)
        plan = schedule(runtime, "total", count=2000, horizon=30, rng=random.Random(7))
        # The crash-recovery bound (docs/guarantees.md): a message hit by a dispatcher crash or error
        # is delivered within 120 s of its due time, and the last is due `horizon` after the last POST.
        # The drain ends as soon as everything has come out; a message the recovery sweep had to find
        # (minutes) still misses it.
        statuses = drain(runtime, callback, "total", plan, timeout=30 + 120)
        verdict = judge(plan, callback.snapshot(), statuses)
    finally:
        runtime.stop()
    faults = faults_of(tmp_path / "faults.json")
    live = liveness_of(moto_endpoint, tmp_path, "total")
    REPORTS.append(verdict.line(faults, time.monotonic() - started) + "; " + live.line())
    assert sum(v for k, v in faults.items() if k[0].islower()) > 0, "no fault was injected"
    explain(moto_endpoint, tmp_path, "total", verdict.lost, "lost")
    lost = Counter(statuses.get(i, "absent") for i in verdict.lost)
    assert (verdict.lost, verdict.unexpected) == ([], []), f"lost by status: {lost}"
    assert live.ok, live.stuck[:20]


@pytest.mark.skipif(os.environ.get("HOURGLASS_SOAK") != "1", reason="soak: run with `make soak`")
def test_total_queue_soak_with_process_kills(moto_endpoint: str, tmp_path: Path, callback: Callback) -> None:
    """Longer, every fault including SIGKILLs of the runtime; the drain waits out the recovery sweep."""
    runtime = chaos_runtime(moto_endpoint, tmp_path, SOAK_ODDS).start()
    started = time.monotonic()
    rng = random.Random(11)
    try:
        status, _ = steady(runtime, "PUT", "/v1/queues/soak", {"target": {"type": "http", "url": callback.url}})
        assert status in (200, 201)
        plan = Plan()
        for _ in range(int(os.environ.get("HOURGLASS_SOAK_ROUNDS", "5"))):
            schedule(runtime, "soak", count=1500, horizon=90, rng=rng, plan=plan)
            time.sleep(rng.uniform(5, 30))
            runtime.kill()
            runtime.start()
        # what a killed process had claimed comes back with the recovery sweep, minutes later
        statuses = drain(runtime, callback, "soak", plan, timeout=600)
        verdict = judge(plan, callback.snapshot(), statuses)
    finally:
        runtime.stop()
    live = liveness_of(moto_endpoint, tmp_path, "soak")
    faults = faults_of(tmp_path / "faults.json")
    REPORTS.append("soak " + verdict.line(faults, time.monotonic() - started) + "; " + live.line())
    lost = Counter(statuses.get(i, "absent") for i in verdict.lost)
    assert (verdict.lost, verdict.unexpected) == ([], []), f"lost by status: {lost}"
    assert live.ok, live.stuck[:20]
