"""Steady load: what a million messages cost at 1,000 a second (100 B bodies, 1-day delay, HTTP target), counted
from the requests the code makes with the batching that rate brings, on-demand and provisioned.

In process (moto, a fixed clock): a few seconds of that load are posted in requests of 100, swept a day later by
one scheduled run (the stack's: every 60 s, 300 s look-ahead), and dispatched as Lambda's event source hands the
timer queue's packs out (10 records an invocation). Each request is priced (DynamoDB units by
`bench.capacity_units`' rules, SQS requests, Lambda requests and billed time, API Gateway requests); what a sweep
run costs whatever it hands off (its state item, its invocation) is shared among the 60,000 messages a run hands
off at this rate. The opt-in features are priced the same way, each on its own queue or stack beside the base.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.timer_queue import read_timers
from hourglass.core import fanout
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.service.dispatch import Dispatcher
from hourglass.service.messages import Messages
from hourglass.service.sweep import CLAIM_THREADS, SEND_CHUNK, Sweeper
from moto import mock_aws

from bench import inprocess
from bench.capacity_units import CapacityMeter, indexes_of
from bench.cost import (
    MEMORY_GB,
    PRICE_LAMBDA_GB_SECOND,
    PRICE_LAMBDA_REQUEST,
    PRICE_READ_UNIT,
    PRICE_SCHEDULER_INVOCATION,
    PRICE_SQS_REQUEST,
    PRICE_WRITE_UNIT,
)
from bench.history_cost import history_units
from bench.report import Section
from bench.throughput import _inline_pools
from stacks.hourglass_stack import DISPATCH_BATCH_SIZE

RATE = 1000  # messages a second
POST_SIZE = 100  # messages a POST (as the precision run)
BODY_BYTES = 100
DELAY = timedelta(days=1)
# The hand-off path's figure: due within the look-ahead, so ingest sends the timers and no sweep claims them.
HANDOFF_DELAY = timedelta(seconds=60)
SWEEP_INTERVAL = contract.DEFAULT_SWEEP_INTERVAL
PER_RUN = RATE * SWEEP_INTERVAL  # what one sweep run hands off at this rate
# Provisioned capacity (us-east-1, Standard table class): per WCU-hour and RCU-hour; the stack's auto scaling keeps
# the consumed share near its target utilisation (stacks/constructs/message_table.py, CapacitySettings).
PRICE_WCU_HOUR = 0.00065
PRICE_RCU_HOUR = 0.00013
TARGET_UTILISATION = 0.70
# API Gateway REST API, first 333 million requests a month.
PRICE_API_REQUEST = 3.50 / 1e6
# Google Cloud Tasks: create + dispatch, $0.40 per million operations each.
PRICE_CLOUD_TASKS = 0.80 / 1e6
BUDGET_PROVISIONED = 1.00
BUDGET_ON_DEMAND = 3.00
# Assumed: one DynamoDB or SQS request in the region takes 10 ms, the HTTP target answers in 50 ms. Billed time is
# the fixed clock's (the dispatcher's wait for the due times) plus these, as the code overlaps them: a dispatcher
# invocation ends with its last timer's begin, request and outcome; a sweep run makes CLAIM_THREADS requests at a
# time; an ingest request makes its requests one after the other.
REQUEST_SECONDS = 0.010
TARGET_SECONDS = 0.050
QUEUE = "steady"


@dataclass
class Counted:
    """What `seconds` of the load took: per-message figures once divided by `messages`."""

    messages: int = 0
    delivered: int = 0
    write: dict[str, float] = field(default_factory=dict)  # by use: message items (with their index entries), ...
    read: dict[str, float] = field(default_factory=dict)
    sqs: Counter[str] = field(default_factory=Counter)
    invocations: dict[str, float] = field(default_factory=dict)
    gb_seconds: dict[str, float] = field(default_factory=dict)
    api_requests: int = 0
    dispatcher_seconds: list[float] = field(default_factory=list)

    def per_message(self, figures: dict[str, float]) -> dict[str, float]:
        return {k: v / max(1, self.messages) for k, v in figures.items()}

    def dollars(self, *, provisioned: bool = False, utilisation: float = TARGET_UTILISATION) -> dict[str, float]:
        """US$ per million messages, per service."""
        writes, reads = sum(self.write.values()), sum(self.read.values())
        if provisioned:
            dynamodb = writes * PRICE_WCU_HOUR / 3600 / utilisation + reads * PRICE_RCU_HOUR / 3600 / utilisation
        else:
            dynamodb = writes * PRICE_WRITE_UNIT + reads * PRICE_READ_UNIT
        figures = {
            "DynamoDB": dynamodb,
            "SQS": sum(self.sqs.values()) * PRICE_SQS_REQUEST,
            "Lambda requests": sum(self.invocations.values()) * PRICE_LAMBDA_REQUEST,
            "Lambda duration": sum(self.gb_seconds.values()) * PRICE_LAMBDA_GB_SECOND,
            "API Gateway": self.api_requests * PRICE_API_REQUEST,
        }
        million = 1e6 / max(1, self.messages)
        out = {k: round(v * million, 4) for k, v in figures.items()}
        out["total"] = round(sum(out.values()), 3)
        return out


def simulate(
    seconds: float,
    *,
    settings: dict[str, Any] | None = None,
    message: Callable[[int], dict[str, Any]] | None = None,
    order_created: bool = True,
    order_due: bool = True,
    post: Callable[..., Any] = inprocess.ok,
    delay: timedelta = DELAY,
) -> Counted:
    """`seconds` of RATE messages a second to one queue (`settings` beside its HTTP target; `message(i)` the
    fields message i adds), a table with the `created` and `list` indexes or not, each due `delay` after it is posted,
    counted."""
    total = int(RATE * seconds)
    with mock_aws(), _inline_pools():
        clock = inprocess.Clock()
        metered = inprocess.metered(post=post, clock=clock, projected=inprocess.DUE_INDEX.projected)
        ddb, table = metered.aws.ddb, metered.aws.table
        dropped = [name for name, kept in (("created", order_created), ("list", order_due)) if not kept]
        for name in dropped:
            ddb.update_table(TableName=table, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": name}}])
        meter = CapacityMeter(table, indexes_of(ddb.describe_table(TableName=table)["Table"]))
        inprocess.meter_table(metered.ctx, meter)
        sqs_calls: Counter[str] = Counter()
        metered.aws.sqs.meta.events.register("before-call.sqs", lambda model, **_: sqs_calls.update([model.name]))
        Messages(metered.ctx).queues.put(
            QUEUE, {"target": {"type": "http", "url": "http://127.0.0.1:9/x"}, **(settings or {})}
        )
        counted = Counted(messages=total)
        phases = _Phases(meter, sqs_calls)
        _ingest(metered, total, message, counted, phases, delay)
        if delay > timedelta(seconds=metered.ctx.settings.timing.sweep_ahead):
            _sweep(metered, total, counted, phases)
        _dispatch(metered, counted, phases)
        if meter.errors:
            raise RuntimeError(f"capacity rules could not price a request: {meter.errors[:3]}")
        keys, _ = meter.snapshot()
        counted.delivered = sum(
            1 for k in keys if k[0] == QUEUE and meter.items.get(k, {}).get("status", {}).get("S") == "delivered"
        )
    return counted


@dataclass
class _Phases:
    """Requests and units per phase: a phase's figures are what the meter and the SQS hook saw since the last."""

    meter: CapacityMeter
    sqs_calls: Counter[str]
    ddb_ops: int = 0
    sqs_ops: int = 0
    write: dict[str, float] = field(default_factory=dict)
    read: dict[str, float] = field(default_factory=dict)

    def take(self) -> tuple[int, dict[str, float], dict[str, float]]:
        """(requests, write units by use, read units by use) since the last call."""
        ops = sum(self.meter.operations.values())
        sqs = sum(self.sqs_calls.values())
        requests = ops - self.ddb_ops + sqs - self.sqs_ops
        self.ddb_ops, self.sqs_ops = ops, sqs
        write, read = _by_use(self.meter)
        delta_w = {k: v - self.write.get(k, 0.0) for k, v in write.items()}
        delta_r = {k: v - self.read.get(k, 0.0) for k, v in read.items()}
        self.write, self.read = write, read
        return requests, delta_w, delta_r


def _by_use(meter: CapacityMeter) -> tuple[dict[str, float], dict[str, float]]:
    keys, uses = meter.snapshot()
    write: dict[str, float] = {"message items": sum(u.write for u in keys.values())}
    read: dict[str, float] = {"message items": sum(u.read for u in keys.values())}
    for use, units in uses.items():
        write[use] = units.write
        read[use] = units.read
    return write, read


def _add(target: dict[str, float], figures: dict[str, float], scale: float = 1.0) -> None:
    for k, v in figures.items():
        if v:
            target[k] = target.get(k, 0.0) + v * scale


def _ingest(
    metered: inprocess.Metered,
    total: int,
    message: Callable[[int], dict[str, Any]] | None,
    counted: Counted,
    phases: _Phases,
    delay: timedelta,
) -> None:
    messages = Messages(metered.ctx)
    before = dict(phases.sqs_calls)
    phases.take()
    body = "x" * (BODY_BYTES - 2)
    start = to_ms(metered.clock())
    for first in range(0, total, POST_SIZE):
        metered.clock.now = from_ms(start + first * 1000 // RATE)
        due = start + int(delay.total_seconds() * 1000)
        batch = [
            {"body": body, "deliver_at": _iso(due + i * 1000 // RATE), **(message(i) if message else {})}
            for i in range(first, min(total, first + POST_SIZE))
        ]
        messages.create(QUEUE, {"messages": batch})
        requests, write, read = phases.take()
        _add(counted.write, write)
        _add(counted.read, read)
        counted.api_requests += 1
        _bill(counted, "ingest", requests * REQUEST_SECONDS)
    counted.sqs.update(_since(before, phases.sqs_calls))


def _sweep(metered: inprocess.Metered, total: int, counted: Counted, phases: _Phases) -> None:
    """One scheduled run hands the whole slice off; what a run costs whatever it hands off is charged at the share
    of the slice in a steady run's PER_RUN messages."""
    settings = metered.ctx.settings
    first_due = to_ms(inprocess.T0) + int(DELAY.total_seconds() * 1000)
    last_due = first_due + total * 1000 // RATE
    inprocess.reset_watermarks(metered.aws.ddb, metered.ctx.store, metered.aws.table, first_due - 1)
    metered.clock.now = from_ms(last_due) - timedelta(seconds=settings.timing.sweep_ahead) + timedelta(seconds=1)
    before = dict(phases.sqs_calls)
    phases.take()
    Sweeper(metered.ctx).run()
    requests, write, read = phases.take()
    share = total / PER_RUN
    for use in ("sweeper state",):
        _add(counted.write, {use: write.pop(use, 0.0)}, share)
        _add(counted.read, {use: read.pop(use, 0.0)}, share)
    _add(counted.write, write)
    _add(counted.read, read)
    counted.sqs.update(_since(before, phases.sqs_calls))
    # A steady run: one scheduled invocation and its fan-out invocations, its requests CLAIM_THREADS at a time.
    runs = 1 + fanout.invocation_count(PER_RUN, settings.sweep_capacity, settings.shards, lagging=False)
    counted.invocations["sweeper"] = counted.invocations.get("sweeper", 0.0) + runs * share
    _bill(counted, "sweeper", requests * REQUEST_SECONDS / CLAIM_THREADS, invocations=0)


def _dispatch(metered: inprocess.Metered, counted: Counted, phases: _Phases) -> None:
    """The timer queue's packs in the order they become visible, DISPATCH_BATCH_SIZE records an invocation, each
    invocation starting when its first record shows (its first timer's due time less the head start)."""
    reader = boto3.client("sqs", region_name="us-east-1")
    url = metered.aws.timer_url
    inprocess._lift_delays()
    records: list[tuple[int, str, str, str]] = []
    while True:
        got = reader.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            break
        for m in got:
            first = min(t.due_ms for t in read_timers(m["Body"]))
            records.append((first, m["MessageId"], m["Body"], m["ReceiptHandle"]))
    records.sort()
    before = dict(phases.sqs_calls)
    phases.take()
    dispatcher = Dispatcher(metered.ctx)
    for first in range(0, len(records), DISPATCH_BATCH_SIZE):
        batch = records[first : first + DISPATCH_BATCH_SIZE]
        started = from_ms(batch[0][0]) - timedelta(seconds=TIMER_HEAD_START)
        metered.clock.now = started
        dispatcher.run_batch([(r[1], r[2]) for r in batch], receipts={r[1]: r[3] for r in batch})
        # Lambda's event source: one ReceiveMessage for the batch, one DeleteMessageBatch after it.
        counted.sqs.update({"ReceiveMessage (event source)": 1, "DeleteMessageBatch (event source)": 1})
        waited = (metered.clock() - started).total_seconds()
        billed = waited + 3 * REQUEST_SECONDS + TARGET_SECONDS
        counted.dispatcher_seconds.append(billed)
        _bill(counted, "dispatcher", billed)
    _, write, read = phases.take()
    _add(counted.write, write)
    _add(counted.read, read)
    counted.sqs.update(_since(before, phases.sqs_calls))
    for m in records:
        reader.delete_message(QueueUrl=url, ReceiptHandle=m[3])


def _since(before: dict[str, int], now: Counter[str]) -> dict[str, int]:
    """The SQS requests made since `before`, by operation."""
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


def _bill(counted: Counted, function: str, seconds: float, invocations: int = 1) -> None:
    """Lambda's billed time: rounded up to the millisecond, at the function's memory."""
    counted.invocations[function] = counted.invocations.get(function, 0.0) + invocations
    gb = math.ceil(seconds * 1000) / 1000 * MEMORY_GB[function]
    counted.gb_seconds[function] = counted.gb_seconds.get(function, 0.0) + gb


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# the opt-in features --------------------------------------------------------------------------
FEATURES: dict[str, dict[str, Any]] = {
    "order=due (stack switch hourglass:order_due)": {"order_due": True},
    "order=created (stack switch hourglass:order_created)": {"order_created": True},
    "flow keys (key_rate_limit 1,000, 100 keys)": {
        "settings": {"flow_control": {"key_rate_limit": 1000}},
        "message": lambda i: {"flow_key": f"k{i % 100}"},
    },
    "key concurrency (key_max_concurrency 100, 100 keys)": {
        "settings": {"flow_control": {"key_max_concurrency": 100}},
        "message": lambda i: {"flow_key": f"k{i % 100}"},
    },
    "windows (a delivery window the messages fall in)": {"settings": {"window": {"from": "00:00", "to": "23:59"}}},
    "circuit breaker (the contract's defaults)": {"settings": {"circuit_breaker": {}}},
}


def base(seconds: float, delay: timedelta = DELAY) -> Counted:
    """A queue using no opt-in feature, on a stack without the list orders' indexes (`created`, `list`)."""
    return simulate(seconds, order_created=False, order_due=False, delay=delay)


def feature_costs(seconds: float, base_run: Counted) -> dict[str, dict[str, float]]:
    """$/M each feature adds over `base_run` (on-demand and provisioned), each priced alone."""
    out: dict[str, dict[str, float]] = {}
    for name, feature in FEATURES.items():
        run = simulate(
            seconds,
            settings=feature.get("settings"),
            message=feature.get("message"),
            order_created=feature.get("order_created", False),
            order_due=feature.get("order_due", False),
        )
        out[name] = _delta(run, base_run)
    return out


def _delta(run: Counted, base_run: Counted) -> dict[str, float]:
    on, off = run.dollars(), base_run.dollars()
    prov, prov_off = run.dollars(provisioned=True), base_run.dollars(provisioned=True)
    wu = sum(run.per_message(run.write).values()) - sum(base_run.per_message(base_run.write).values())
    return {
        "WU": round(wu, 3),
        "on_demand": round(on["total"] - off["total"], 3),
        "provisioned": round(prov["total"] - prov_off["total"], 3),
    }


# the section ----------------------------------------------------------------------------------
def section(*, quick: bool = False) -> Section:
    result = Section("steady", "3d. Steady load: US$ per million at 1,000 msg/s (100 B, 1-day delay, HTTP target)")
    # A feature's slice is one sweep chunk (SEND_CHUNK messages): what a flow key's pacing write is shared by.
    seconds, feature_seconds = (0.2, 0.1) if quick else (1.0, SEND_CHUNK / RATE)
    run = base(seconds)
    on, prov = run.dollars(), run.dollars(provisioned=True)
    result.check(
        "messages delivered",
        f"{run.delivered:,} of {run.messages:,}",
        budget="all",
        passed=run.delivered == run.messages,
    )
    result.at_most("all-in, provisioned capacity (70 % target utilisation)", prov["total"], "US$/M", BUDGET_PROVISIONED)
    result.at_most("all-in, on-demand capacity", on["total"], "US$/M", BUDGET_ON_DEMAND)
    handoff = base(feature_seconds, HANDOFF_DELAY)
    result.check("hand-off path (due within the look-ahead): on-demand", handoff.dollars()["total"], "US$/M")
    result.check("hand-off path: provisioned", handoff.dollars(provisioned=True)["total"], "US$/M")
    result.check("hand-off path: write units per message", round(sum(handoff.per_message(handoff.write).values()), 3))
    result.check("EventBridge Scheduler, one-time schedules", PRICE_SCHEDULER_INVOCATION * 1e6, "US$/M")
    result.check("Google Cloud Tasks, create + dispatch", PRICE_CLOUD_TASKS * 1e6, "US$/M")
    writes, reads = run.per_message(run.write), run.per_message(run.read)
    result.check("DynamoDB write units per message", round(sum(writes.values()), 3), "WU")
    for use, units in sorted(writes.items(), key=lambda kv: -kv[1]):
        result.check(f"… {use}", round(units, 3), "WU")
    result.check("DynamoDB read units per message", round(sum(reads.values()), 3), "RU")
    result.check("SQS requests per message", round(sum(run.sqs.values()) / run.messages, 4))
    result.check("messages per dispatcher invocation", round(run.messages / max(1.0, run.invocations["dispatcher"]), 1))
    billed = sorted(run.dispatcher_seconds)
    result.check("dispatcher billed time per invocation (median)", round(billed[len(billed) // 2], 3), "s")
    rows = [[name, f"{on[name]:.3f}", f"{prov[name]:.3f}"] for name in on]
    counters = writes.get("status counters", 0.0)
    features = {"counts (status counters, always kept)": _units_delta(counters)}
    features |= feature_costs(feature_seconds, run)
    features["attempt history (per retried message, first retry)"] = _units_delta(history_units(2)[0])
    for name, added in features.items():
        rows.append([f"+ {name}", f"{added['on_demand']:+.3f} ({added['WU']:+.2f} WU)", f"{added['provisioned']:+.3f}"])
    result.data["table"] = {"header": ["US$ per million", "on-demand", "provisioned (70 %)"], "rows": rows}
    result.data.update(
        {
            "messages": run.messages,
            "write_units_per_message": writes,
            "read_units_per_message": reads,
            "sqs_requests": dict(run.sqs),
            "lambda_invocations": run.invocations,
            "lambda_gb_seconds": run.gb_seconds,
            "usd_per_million": {"on_demand": on, "provisioned": prov},
            "features": features,
        }
    )
    result.notes += [
        f"{run.messages:,} messages ({seconds:g} s of the load) in POSTs of {POST_SIZE}, counted in process "
        f"(moto, fixed clock): swept by one scheduled run, dispatched {DISPATCH_BATCH_SIZE} timer packs an "
        f"invocation as they become visible. A sweep run's own state and invocations are shared among the "
        f"{PER_RUN:,} messages a run hands off at this rate.",
        "Base: a queue using no opt-in feature, on a stack deployed with hourglass:order_due and "
        "hourglass:order_created false. The `+` rows "
        f"are what each feature adds, each priced alone ({feature_seconds:g} s of the load) on its own queue or "
        "stack; counts are the base run's counter writes; attempt history is per message retried once "
        "(bench/history_cost.py).",
        f"Provisioned: ${PRICE_WCU_HOUR}/WCU-hour and ${PRICE_RCU_HOUR}/RCU-hour at {TARGET_UTILISATION:.0%} "
        "consumed (the auto-scaling target), table and indexes alike; on-demand at bench/cost.py's prices.",
        f"Billed Lambda time: the fixed clock's waits plus {REQUEST_SECONDS * 1000:g} ms per AWS request (a sweep "
        f"run's {CLAIM_THREADS} at a time) and {TARGET_SECONDS * 1000:g} ms for the HTTP target (assumed); "
        "API Gateway REST at $3.50/M requests.",
    ]
    return result


def _units_delta(write_units: float) -> dict[str, float]:
    """What `write_units` per message add, in $/M."""
    return {
        "WU": round(write_units, 3),
        "on_demand": round(write_units * PRICE_WRITE_UNIT * 1e6, 3),
        "provisioned": round(write_units * PRICE_WCU_HOUR / 3600 / TARGET_UTILISATION * 1e6, 3),
    }


def main() -> int:
    import os
    import sys

    from hourglass import logs

    from devstack.emulator import use_dummy_credentials

    logs.set_level(os.environ.setdefault("HOURGLASS_LOG_LEVEL", "WARNING"))
    use_dummy_credentials("us-east-1")
    print(section(quick="--quick" in sys.argv).markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
