"""`python -m bench.deployed_load` (`make bench-deployed`): a load run of the stack as `cdk deploy`ed into MiniStack,
every DynamoDB request logged (bench.ddb_recorder); each item kind's writes and reads per message on the hand-off
and sweep paths beside the model's (bench.capacity_items). Table on stdout, JSON in bench/results/deployed_load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import capacity_items, item_kinds
from bench.receiver import Receiver
from bench.report import RESULTS, Section
from devstack import api_call
from devstack.config import RuntimeConfig
from devstack.deployed import CACHE, DeployedStack
from devstack.emulator import free_port, use_dummy_credentials
from devstack.ministack import MiniStack

PATHS = ("handoff", "sweep")
# As the upgrade and e2e tests deploy: a sweep a minute (EventBridge's finest) over a 65 s look-ahead, so a
# message due more than look-ahead + hand-off safety (30 s) after its POST waits for a sweep.
LOOKAHEAD = 65
SWEEP_INTERVAL = 60
HANDOFF_DUE = 45  # s after the run starts: handed off at ingest (within 95 s of every POST)
SWEEP_DUE = 150  # s after the run starts: stored, claimed by the sweep run that reaches it
POST_SIZE = capacity_items.POST_SIZE
TOLERANCE = 0.2  # a measured figure off the model's by more than this is flagged
REQUESTS_LOG = "HOURGLASS_DDB_LOG"


@dataclass
class Run:
    """What the load run did: its queues by path, message ids by path, POST and arrival times."""

    queues: dict[str, str]
    due: dict[str, float]
    ids: dict[str, set[str]] = field(default_factory=dict)
    ingest_seconds: float = 0.0
    started: float = 0.0
    ended: float = 0.0


# ------------------------------------------------------------------------------------------ the run


def start(port: int, requests_log: Path) -> tuple[MiniStack, DeployedStack]:
    """MiniStack wrapped by the request log, then `cdk bootstrap` and `cdk deploy` into it."""
    use_dummy_credentials("us-east-1")
    os.environ[REQUESTS_LOG] = str(requests_log)
    emulator = MiniStack.start(port, log_path=CACHE / f"ministack-{port}.log", module="bench.ddb_recorder")
    config = RuntimeConfig(
        endpoint_url=emulator.endpoint_url, emulator_port=port, sweep_interval=SWEEP_INTERVAL, lookahead=LOOKAHEAD
    )
    try:
        return emulator, DeployedStack(config).start()
    except BaseException:
        emulator.stop()
        raise


def create_queue(stack: DeployedStack, name: str, url: str) -> None:
    status, doc = api_call.call(
        stack.api_url, "PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": url}}, api_key=stack.api_key
    )
    assert status == 201, doc


def post(stack: DeployedStack, queue: str, batch: list[dict[str, Any]]) -> list[str]:
    status, doc = api_call.call(
        stack.api_url, "POST", f"/v1/queues/{queue}/messages", {"messages": batch}, api_key=stack.api_key, timeout=120
    )
    assert status == 201, doc
    return [m["id"] for m in doc["messages"]]


def warm_up(stack: DeployedStack, receiver: Receiver, clients: int) -> None:
    """A POST per client, due at once: the functions' processes start before the measured run."""
    queue = f"warm{uuid.uuid4().hex[:6]}"
    create_queue(stack, queue, receiver.url)
    batches = [[{"body": i, "delay": 0} for i in range(10)] for _ in range(clients)]
    with ThreadPoolExecutor(clients) as pool:
        ids = {i for got in pool.map(lambda b: post(stack, queue, b), batches) for i in got}
    wait_for(receiver, ids, 120)


def load(stack: DeployedStack, receiver: Receiver, per_path: int, clients: int) -> Run:
    """`per_path` messages on each path in POSTs of 100 from `clients` threads, each path's due at one instant."""
    run = Run({path: f"{path}{uuid.uuid4().hex[:6]}" for path in PATHS}, {})
    for queue in run.queues.values():
        create_queue(stack, queue, receiver.url)
    run.started = time.time()
    run.due = {"handoff": run.started + HANDOFF_DUE, "sweep": run.started + SWEEP_DUE}
    jobs = [(path, n) for n in range(0, per_path, POST_SIZE) for path in PATHS]

    def send(job: tuple[str, int]) -> tuple[str, list[str]]:
        path, first = job
        at = datetime.fromtimestamp(run.due[path], UTC).isoformat()
        batch = [{"body": first + i, "deliver_at": at} for i in range(min(POST_SIZE, per_path - first))]
        return path, post(stack, run.queues[path], batch)

    run.ids = {path: set() for path in PATHS}
    with ThreadPoolExecutor(clients) as pool:
        for path, ids in pool.map(send, jobs):
            run.ids[path].update(ids)
    run.ingest_seconds = time.time() - run.started
    assert run.ingest_seconds < HANDOFF_DUE - 5, f"ingest took {run.ingest_seconds:.0f} s: fewer messages"
    wait_for(receiver, run.ids["handoff"] | run.ids["sweep"], SWEEP_DUE + 600 - (time.time() - run.started))
    run.ended = time.time()
    return run


def wait_for(receiver: Receiver, ids: set[str], timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not ids <= receiver.arrived.keys():
        time.sleep(0.5)
    time.sleep(2)  # the last writes (outcomes) land after the target answered


# ------------------------------------------------------------------------------------ the request log


def entries(requests_log: Path, since: float) -> Iterator[dict[str, Any]]:
    with requests_log.open() as lines:
        for line in lines:
            entry = json.loads(line)
            if entry.get("t", 0) >= since and "error" not in entry:
                yield entry


@dataclass
class Tally:
    """Item operations by (path, kind), per-second writes by item and by partition, sweep-run times."""

    writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    refused: Counter[tuple[str, str]] = field(default_factory=Counter)  # writes answered 400 (a failed condition)
    reads: Counter[tuple[str, str]] = field(default_factory=Counter)
    item_seconds: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    partition_seconds: Counter[tuple[str, int]] = field(default_factory=Counter)
    sweeper_times: list[float] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    scanned: Counter[str] = field(default_factory=Counter)  # items a Scan read, by index ("" the table)


def path_of(pk: str | None, kind: str, queues: dict[str, str], *, write: bool = True) -> str:
    """The path an item operation belongs to: its queue's; the sweep path's for writes of the due buckets'
    records (hand-offs write none); "global" for the other shared items (read or written per sweep run);
    "other" for other queues' (the warm-up's)."""
    by_queue = {queue: path for path, queue in queues.items()}
    if pk in by_queue:
        return by_queue[pk]
    if kind == item_kinds.BUCKETS and write:
        return "sweep"
    return "global" if pk in item_kinds.PARTITIONS else "other"


def tally(requests_log: Path, run: Run) -> Tally:
    counted = Tally()
    for entry in entries(requests_log, run.started):
        second = int(entry["t"])
        if entry["op"] == "index":
            for index, index_pk, writes in entry["gsi"]:
                kind = item_kinds.classify_entry(index, index_pk)
                path = path_of(entry["key"][0], kind, run.queues)
                counted.writes[(path, kind)] += writes
                counted.partition_seconds[(f"{index}: {index_pk}", second)] += writes
            continue
        counted.ops[entry["op"]] += 1
        if entry["op"] == "Scan":
            counted.scanned[entry.get("index") or ""] += len(entry["r"])
            continue
        for pk, sk in entry.get("w", []) + entry.get("c", []):
            kind = item_kinds.classify(pk, sk)
            counted.writes[(path_of(pk, kind, run.queues), kind)] += 1
            counted.refused[(path_of(pk, kind, run.queues), kind)] += entry["status"] == 400
            counted.item_seconds[(pk, sk, second)] += 1
            counted.partition_seconds[(f"table: {pk}", second)] += 1
            if kind == item_kinds.SWEEPER:
                counted.sweeper_times.append(entry["t"])
            if kind == item_kinds.UNKNOWN:
                counted.unknown[f"{pk} | {sk}"] += 1
        for read in entry.get("r", []):
            kind = (
                item_kinds.classify_entry(entry["index"], read[2]) if entry.get("index") else item_kinds.classify(*read)
            )
            counted.reads[(path_of(read[0], kind, run.queues, write=False), kind)] += 1
    return counted


def sweep_runs(times: list[float], gap: float = SWEEP_INTERVAL / 3) -> int:
    """Sweep runs: the sweep state's writes, in bursts a sweep interval apart."""
    ordered = sorted(times)
    return sum(1 for i, t in enumerate(ordered) if i == 0 or t - ordered[i - 1] > gap)


# ------------------------------------------------------------------------------------------- report


def verdict(measured: float, model: float | None) -> str:
    if model is None:
        return "MODEL MISSES IT" if measured > 0 else ""
    if model == 0:
        return "" if measured == 0 else "model has 0"
    return "" if abs(measured - model) <= TOLERANCE * model else f"OFF by {measured / model - 1:+.0%}"


def _flags(writes: float, model_writes: float | None, reads: float, model_reads: float | None) -> str:
    read = verdict(reads, model_reads)
    return "; ".join(f for f in (verdict(writes, model_writes), read and f"reads: {read}") if f)


def comparison(counted: Tally, run: Run) -> list[dict[str, Any]]:
    """Per path and kind: measured writes and reads per message beside the model's."""
    rows = []
    for path in PATHS:
        model = capacity_items.per_message(path)
        messages = len(run.ids[path])
        kinds = sorted({k for p, k in [*counted.writes, *counted.reads] if p == path} | set(model))
        for kind in kinds:
            w = counted.writes[(path, kind)] / messages
            r = counted.reads[(path, kind)] / messages
            mw, mr = model.get(kind, (None, None))
            refused = counted.refused[(path, kind)] / messages
            rows.append({"path": path, "kind": kind, "writes": w, "refused": refused, "model_writes": mw, "reads": r,
                         "model_reads": mr, "flag": _flags(w, mw, r, mr)})  # fmt: skip
    return rows


def per_run_rows(counted: Tally, runs: int) -> list[dict[str, Any]]:
    """The items written and read per sweep run beside the model's."""
    rows = []
    for kind, (mw, mr) in capacity_items.per_run().items():
        w, r = counted.writes[("global", kind)] / max(1, runs), counted.reads[("global", kind)] / max(1, runs)
        rows.append({"kind": kind, "writes": w, "model_writes": mw, "reads": r, "model_reads": mr,
                     "flag": _flags(w, mw, r, mr)})  # fmt: skip
    return rows


def peaks(counted: Tally, started: float) -> dict[str, Any]:
    """The busiest item and partition (table or index) in any one second, and when (s into the run)."""
    (pk, sk, item_second), item_top = counted.item_seconds.most_common(1)[0]
    (partition, part_second), part_top = counted.partition_seconds.most_common(1)[0]
    return {
        "item": {"key": [pk, sk], "kind": item_kinds.classify(pk, sk), "writes_per_s": item_top,
                 "at_s": round(item_second - started)},
        "partition": {"partition": partition, "writes_per_s": part_top, "at_s": round(part_second - started)},
    }  # fmt: skip


def delivery(receiver: Receiver, run: Run) -> dict[str, Any]:
    figures: dict[str, Any] = {"ingest_per_s": sum(map(len, run.ids.values())) / run.ingest_seconds}
    for path in PATHS:
        arrived = [receiver.arrived[i] for i in run.ids[path] if i in receiver.arrived]
        last = max(arrived, default=run.due[path])
        figures[path] = {
            "messages": len(run.ids[path]),
            "delivered": len(arrived),
            "deliveries_per_s": len(arrived) / max(1e-3, last - run.due[path]),
            "last_after_due_s": last - run.due[path],
        }
    figures["duplicates"] = receiver.duplicates
    return figures


def section(doc: dict[str, Any]) -> Section:
    result = Section("deployed_load", "Load run of the stack as deployed (MiniStack): item operations per message")
    rates = doc["rates"]
    result.check("ingest (POSTs of 100, both paths)", round(rates["ingest_per_s"]), "messages/s")
    for path in PATHS:
        got = rates[path]
        result.check(f"{path}: delivered", f"{got['delivered']:,} of {got['messages']:,}")
        result.check(f"{path}: deliveries/s (all due at one instant)", round(got["deliveries_per_s"], 1), "/s")
        result.check(f"{path}: last delivery after the due time", round(got["last_after_due_s"], 1), "s")
    result.check("deliveries received twice", rates["duplicates"])
    peak = doc["peaks"]
    item, part = peak["item"], peak["partition"]
    result.check("busiest item, writes in one second", item["writes_per_s"],
                 f"({item['kind']} {item['key'][1]}, {item['at_s']} s into the run)")  # fmt: skip
    result.check("busiest partition, writes in one second", part["writes_per_s"],
                 f"({part['partition']}, {part['at_s']} s into the run)")  # fmt: skip
    header = ["path", "item kind", "writes/msg", "of them refused", "model", "reads/msg", "model", "flag"]
    rows = [[r["path"], r["kind"], _n(r["writes"]), _n(r["refused"]), _n(r["model_writes"]), _n(r["reads"]),
             _n(r["model_reads"]), r["flag"]] for r in doc["per_message"]]  # fmt: skip
    rows += [["per sweep run", r["kind"], _n(r["writes"]), "", _n(r["model_writes"]), _n(r["reads"]),
              _n(r["model_reads"]), r["flag"]] for r in doc["per_run"]]  # fmt: skip
    result.data["table"] = {"header": header, "rows": rows}
    flagged = [r for r in doc["per_message"] + doc["per_run"] if r["flag"]]
    result.notes.append(f"{len(flagged)} figures off the model's by more than {TOLERANCE:.0%} or missing from it.")
    result.notes.append(
        f"{doc['sweep_runs']} sweep runs in the window; writes count every item a request writes (a refused "
        "conditional write too, as DynamoDB bills it), index entries every entry put, removed or rewritten; "
        "reads count items returned."
    )
    for index, items in doc["scanned"].items():
        result.notes.append(
            f"A Scan of the {index or 'table'} {'index ' if index else ''}read {items:,} items, not counted above: "
            "the first sweep of a new stack (no sweep state yet) scans the due index once for its buckets."
        )
    if doc["unclassified"]:
        result.notes.append("Unclassified keys: " + ", ".join(f"{k} ({n})" for k, n in doc["unclassified"].items()))
    result.notes.append(
        "MiniStack is one process (its Lambdas forked from it) on this machine's cores: the rates are the "
        "emulator's, not AWS's; the per-message counts do not depend on them."
    )
    return result


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


# --------------------------------------------------------------------------------------------- main


def measure(per_path: int, clients: int) -> dict[str, Any]:
    port = free_port()
    requests_log = CACHE / f"ddb-requests-{port}.jsonl"
    CACHE.mkdir(exist_ok=True)
    receiver = Receiver().start()
    emulator, stack = start(port, requests_log)
    try:
        print(f"bench-deployed: stack up in {sum(stack.timings.values()):.0f} s; warming up", flush=True)
        warm_up(stack, receiver, clients)
        print(f"bench-deployed: {per_path:,} messages per path from {clients} clients", flush=True)
        run = load(stack, receiver, per_path, clients)
    finally:
        stack.stop()
        emulator.stop()
        receiver.stop()
    counted = tally(requests_log, run)
    runs = sweep_runs(counted.sweeper_times)
    return {
        "per_path": per_path,
        "clients": clients,
        "queues": run.queues,
        "started": run.started,
        "rates": delivery(receiver, run),
        "sweep_runs": runs,
        "per_message": comparison(counted, run),
        "per_run": per_run_rows(counted, runs),
        "peaks": peaks(counted, run.started),
        "operations": dict(counted.ops.most_common()),
        "unclassified": dict(counted.unknown.most_common(10)),
        "scanned": dict(counted.scanned),
        "requests_log": str(requests_log),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1_500, help="messages on each path")
    parser.add_argument("--clients", type=int, default=16, help="concurrent POSTs")
    parser.add_argument("--out", type=Path, default=RESULTS / "deployed_load.json")
    args = parser.parse_args(argv)
    doc = measure(args.messages, args.clients)
    result = section(doc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result.to_json() | doc, indent=2, default=str) + "\n")
    print(result.markdown())
    print(f"bench-deployed: JSON in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
