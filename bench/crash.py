"""Target 4c, crash recovery: the local runtime SIGKILLed mid-flight at each phase of an attempt, restarted.

Per phase (received, begun, delivered) `python -m devstack` runs as a child process on a moto server
of its own (which outlives the kill) with the crash switch HOURGLASS_CRASH_AT (devstack/crash.py): every
attempt that reaches the phase stops there and the process kills itself a few seconds after the first
did. The messages' statuses are read from the table at the kill, the runtime is started again without
the switch, and the receiver says when each message arrived and how often.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.aws import AWS_CONFIG
from hourglass.adapters.store import Store
from hourglass.core.model import FINISHED, Status

from bench.receiver import Receiver
from bench.report import Section, percentile
from devstack.config import CRASH_PHASES
from devstack.emulator import Emulator, free_port
from tests.faults.processes import LocalRuntime

P99_BUDGET = 60.0
MAX_BUDGET = 120.0
POST_BATCH = 100
ENDED = {status.value for status in FINISHED}
HEADER = ["phase", "messages", "affected", "delivering at kill", "restart s", "p50 s", "p99 s", "max s", "duplicates"]


@dataclass(frozen=True)
class CrashConfig:
    messages: int = 100  # per phase
    lead: float = 4.0  # the first message is due this far ahead (handed off at ingest)
    spread: float = 6.0  # the messages are due uniformly over this many seconds
    crash_after: float = 3.0  # the kill comes this long after the first attempt reached the phase
    sweep_interval: float = 2.0
    lookahead: float = 10.0
    handoff_safety: float = 1.0
    settle: float = 240.0  # the longest wait after the restart for every message to end


QUICK = CrashConfig(messages=10, spread=2.0, crash_after=1.0, settle=120.0)


@dataclass(frozen=True)
class PhaseRun:
    phase: str
    due: dict[str, float]  # id -> due time (epoch seconds)
    at_kill: dict[str, str]  # id -> status read from the table right after the kill
    killed_at: float
    ready_at: float  # the restarted runtime answers
    arrived: dict[str, float]  # id -> first arrival
    times: dict[str, int]  # id -> requests the receiver got
    final: dict[str, str]  # id -> status at the end

    @property
    def affected(self) -> list[str]:
        """Not delivered at the kill, and due before the restarted runtime was up."""
        return [i for i, due in self.due.items() if self.at_kill[i] != Status.DELIVERED.value and due < self.ready_at]

    def lateness(self, message_id: str) -> float:
        """From the due time, or from the restart for a message that fell due while nothing ran."""
        due = self.due[message_id]
        return self.arrived[message_id] - (due if due <= self.killed_at else self.ready_at)

    @property
    def takeovers(self) -> set[str]:
        """Delivered before the kill with the outcome not yet written: the documented duplicate."""
        return {i for i, at in self.arrived.items() if at < self.killed_at and self.at_kill[i] == "delivering"}


def run(config: CrashConfig) -> Section:
    emulator = Emulator.start(free_port())
    receiver = Receiver().start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-crash-") as logs:
            runs = [_phase(config, emulator.endpoint_url, receiver, phase, Path(logs)) for phase in CRASH_PHASES]
    finally:
        receiver.stop()
        emulator.stop()
    return _section(config, runs)


def _phase(config: CrashConfig, endpoint: str, receiver: Receiver, phase: str, logs: Path) -> PhaseRun:
    env = {
        contract.SWEEP_INTERVAL: str(config.sweep_interval),
        contract.LOOKAHEAD: str(config.lookahead),
        contract.HANDOFF_SAFETY: str(config.handoff_safety),
        contract.LOG_LEVEL: os.environ.get(contract.LOG_LEVEL, "WARNING"),
    }
    crashing = {**env, "HOURGLASS_CRASH_AT": phase, "HOURGLASS_CRASH_AFTER": str(config.crash_after)}
    runtime = LocalRuntime(endpoint, free_port(), logs / phase, env=crashing)
    (logs / phase).mkdir()
    queue = f"bench-crash-{phase}"
    runtime.start()
    status, _ = runtime.call("PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": receiver.url}})
    assert status in (200, 201), status
    due = _post(runtime, queue, config)
    assert runtime.process is not None
    try:
        runtime.process.wait(timeout=config.lead + config.spread + config.crash_after + 60)
    except Exception:
        runtime.kill()  # no attempt reached the phase: killed from here
    killed_at = time.time()
    store = _store(endpoint)
    at_kill = {i: _status(store, queue, i) for i in due}
    runtime.env = env
    runtime.start()
    ready_at = time.time()
    final = _settle(runtime, queue, due, receiver, config.settle)
    runtime.stop()
    return PhaseRun(
        phase,
        due,
        at_kill,
        killed_at,
        ready_at,
        {i: receiver.arrived[i] for i in due if i in receiver.arrived},
        {i: receiver.times.get(i, 0) for i in due},
        final,
    )


def _post(runtime: LocalRuntime, queue: str, config: CrashConfig) -> dict[str, float]:
    due: dict[str, float] = {}
    n = config.messages
    delays = [config.lead + config.spread * k / max(1, n - 1) for k in range(n)]
    for start in range(0, n, POST_BATCH):
        chunk = delays[start : start + POST_BATCH]
        messages = [{"body": {"k": start + k}, "delay": delay} for k, delay in enumerate(chunk)]
        sent = time.time()
        status, doc = runtime.call("POST", f"/v1/queues/{queue}/messages", {"messages": messages})
        assert status == 201, (status, doc)
        due.update({m["id"]: sent + delay for m, delay in zip(doc["messages"], chunk, strict=True)})
    # The API's own due times (ms) are the ones that count; `sent + delay` only bounds them.
    for message_id in due:
        _, doc = runtime.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
        if doc:
            due[message_id] = _epoch(doc["due_at"])
    return due


def _store(endpoint: str) -> Store:
    """The stack's table, found through its stack output (the runtime that knew it is dead)."""
    cfn = boto3.client("cloudformation", endpoint_url=endpoint, config=AWS_CONFIG)
    outputs = [o for s in cfn.describe_stacks()["Stacks"] for o in s.get("Outputs", [])]
    table = next(o["OutputValue"] for o in outputs if o["OutputKey"] == contract.OUTPUT_TABLE)
    return Store(table, client=boto3.client("dynamodb", endpoint_url=endpoint, config=AWS_CONFIG))


def _status(store: Store, queue: str, message_id: str) -> str:
    message = store.get_message(queue, message_id)
    return "missing" if message is None else message.status.value


def _settle(
    runtime: LocalRuntime, queue: str, due: dict[str, float], receiver: Receiver, wait: float
) -> dict[str, str]:
    """Waits until every message arrived and ended (a takeover's duplicate comes at its lease's end)."""
    final: dict[str, str] = {}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if all(i in receiver.arrived for i in due):
            final = {i: _api_status(runtime, queue, i) for i in due}
            if set(final.values()) <= ENDED:
                return final
        time.sleep(2.0)
    return final


def _api_status(runtime: LocalRuntime, queue: str, message_id: str) -> str:
    _, doc = runtime.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
    return str(doc["status"]) if doc else "?"


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _section(config: CrashConfig, runs: list[PhaseRun]) -> Section:
    section = Section("crash", "Crash recovery: the local runtime SIGKILLed mid-flight at each phase, restarted")
    late = [run.lateness(i) for run in runs for i in run.affected if i in run.arrived]
    lost = sum(1 for run in runs for i in run.due if i not in run.arrived)
    early = sum(1 for run in runs for i, at in run.arrived.items() if at < run.due[i])
    extra = sum(max(0, n - 1) for run in runs for i, n in run.times.items() if i not in run.takeovers)
    takeover = sum(max(0, run.times[i] - 1) for run in runs for i in run.takeovers)
    section.check("messages affected (not delivered at the kill, due before the restart)", len(late))
    section.check("affected: lateness p50", percentile(late, 50), "s")
    section.at_most("affected: lateness p99", percentile(late, 99), "s", P99_BUDGET)
    section.at_most("affected: lateness max", max(late, default=float("nan")), "s", MAX_BUDGET)
    section.at_most("lost (never arrived)", lost, "", 0)
    section.at_most("early", early, "", 0)
    section.at_most("duplicates beyond the documented takeover", extra, "", 0)
    section.check("takeover duplicates (delivered, outcome not written at the kill)", takeover)
    rows = []
    for run in runs:
        phase_late = [run.lateness(i) for i in run.affected if i in run.arrived]
        held = sum(1 for s in run.at_kill.values() if s == "delivering")
        rows.append(
            [
                run.phase,
                str(len(run.due)),
                str(len(run.affected)),
                str(held),
                f"{run.ready_at - run.killed_at:.1f}",
                *(f"{percentile(phase_late, p):.1f}" for p in (50, 99)),
                f"{max(phase_late, default=float('nan')):.1f}",
                str(sum(max(0, n - 1) for n in run.times.values())),
            ]
        )
    section.data["table"] = {
        "header": HEADER,
        "rows": rows,
    }
    section.data["phases"] = {run.phase: _phase_doc(run) for run in runs}
    section.data["config"] = config.__dict__
    section.notes += [
        "lateness = first arrival at the receiver - the due time, or - the restart for a message that fell "
        "due while the runtime was down; `affected` = not delivered at the kill and due before the restart.",
        "a running dispatcher hides its timer records 30 s ahead and renews that every 10 s "
        "(service/heartbeat.py); a timer that finds a running lease comes back at the lease's end (46 s "
        "after the begin for the default 15 s timeout), when it takes the message over.",
    ]
    return section


def _phase_doc(run: PhaseRun) -> dict[str, Any]:
    late = [run.lateness(i) for i in run.affected if i in run.arrived]
    statuses: dict[str, int] = {}
    for status in run.at_kill.values():
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "messages": len(run.due),
        "affected": len(run.affected),
        "at_kill": statuses,
        "restart_s": round(run.ready_at - run.killed_at, 2),
        "lateness_s": {"p50": percentile(late, 50), "p99": percentile(late, 99), "max": max(late, default=None)},
        "duplicates": sum(max(0, n - 1) for n in run.times.values()),
        "takeovers": len(run.takeovers),
        "not_final": sum(1 for status in run.final.values() if status not in ENDED),
    }
