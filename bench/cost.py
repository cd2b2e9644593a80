"""Target 3, cost: what delivering the precision run's messages took, counted, then priced.

DynamoDB units come from the requests the Store made (bench.capacity_units); SQS requests and
Lambda invocations from the local runtime, whose pollers, schedule and invoker stand in for Lambda's
event source, EventBridge and asynchronous Invoke (bench.runtime_meter). Durations are the measured
handler times, which include the emulator's latency.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hourglass.core.keys import MESSAGE_PREFIX

from bench.precision import Run
from bench.report import Section
from stacks.constructs.functions import DISPATCHER, INGEST, SWEEPER

# Published on-demand list prices, us-east-1, checked on 2026-11-25 (PRICES_CHECKED). The AWS pricing pages
# render most figures client-side, so where AWS's own page text did not show the figure the row names the
# secondary source that quotes it; none of them differed from the figure here.
PRICES_CHECKED = "2026-11-25"
# DynamoDB on-demand, Standard table class, per write / read request unit (the rates since the November 2024
# cut); aws.amazon.com/dynamodb/pricing/on-demand/ (its figures are rendered client-side: not re-read).
PRICE_WRITE_UNIT = 0.625 / 1e6
PRICE_READ_UNIT = 0.125 / 1e6
# SQS standard, first 100 billion requests a month, each 64 KB chunk one request; aws.amazon.com/sqs/pricing/,
# quoted as of March and June 2026 (cloudburn.io, factualminds.com).
PRICE_SQS_REQUEST = 0.40 / 1e6
# Lambda requests; aws.amazon.com/lambda/pricing/ (transcribed 2026-09-20 by api-evangelist's price harvest).
PRICE_LAMBDA_REQUEST = 0.20 / 1e6
# The functions run on Arm (stacks/constructs/functions.py): $0.0000133334 per GB-second, not x86's $0.0000166667
# (aws.amazon.com/lambda/pricing/, first 7.5 billion GB-seconds a month; as in artillery's price table).
PRICE_LAMBDA_GB_SECOND = 0.0000133334
# EventBridge Scheduler, after the 14 million free invocations a month; aws.amazon.com/eventbridge/pricing/
# (AWS's price list shows the free tier and $1.25 in Tokyo; the us-east-1 $1.00 was not re-read).
PRICE_SCHEDULER_INVOCATION = 1.00 / 1e6
# Step Functions Standard, $0.025 per 1,000 state transitions in US East (N. Virginia): read on AWS's own page,
# aws.amazon.com/step-functions/pricing/.
PRICE_STEP_TRANSITION = 25.0 / 1e6
# What each target type's service charges for one delivery (us-east-1 list prices, each payload up to 64 KB
# billed as one request where the service bills by 64 KB chunks): SQS SendMessage; Lambda's request charge
# for the asynchronous Invoke (the function's duration is the receiver's); SNS Publish (standard topic,
# delivery to SQS and Lambda subscriptions free); EventBridge custom event (PutEvents entry); Step Functions
# StartExecution of a Standard workflow, billed per state transition (one at least; the machine's own
# transitions are the receiver's). HTTP callbacks cost Hourglass nothing more than its own work.
# SNS: $0.50 per million standard-topic publishes, each 64 KB chunk one (aws.amazon.com/sns/pricing/, quoted as
# of June 2026 by factualminds.com). EventBridge: $1.00 per million custom events, each 64 KB chunk one (the
# chunk rule read on aws.amazon.com/eventbridge/pricing/; the figure quoted as of June 2026 by factualminds.com).
TARGET_PRICES = {
    "http": 0.0,
    "sqs": PRICE_SQS_REQUEST,
    "lambda": PRICE_LAMBDA_REQUEST,
    "sns": 0.50 / 1e6,
    "eventbridge": 1.00 / 1e6,
    "stepfunctions": PRICE_STEP_TRANSITION,
}

# Each includes the two keys-only list indexes (v1.2, `order=due` and `order=created`): one entry each, written
# once when the message is stored (LIST_INDEX_WRITES); a status change never writes them. A stack deployed with
# `hourglass:order_created` false has no `created` index: one write unit less per message.
LIST_INDEX_WRITES = 2.0
HANDOFF_WRITE_BUDGET = 3.0 + LIST_INDEX_WRITES
# The sweep path of a queue with no limits, ordering or schedules: no claim (issue 35; 6 with the claim).
SWEEP_WRITE_BUDGET = 5.0 + LIST_INDEX_WRITES
# The status counters (v1.2 `counts`): one small ADD per request that stores messages and per dispatcher batch
# (every 5 s at most), whatever the number of messages in it (docs/design.md, "Counts"); it was 3 a message
# (stored, started, ended) before issue 35. Even the precision run's small batches (one or two timers an
# invocation) stay well under this.
COUNTER_WRITE_BUDGET = 0.5
SWEEP_READ_BUDGET = 1.0
SQS_BUDGET = 0.3
LAMBDA_BUDGET = 0.15
HOURGLASS_SQS = ("SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch")
# A running dispatcher's hold on its timer records (service/heartbeat.py): one per invocation at least.
HOLD_SQS = "ChangeMessageVisibilityBatch"
BILLED_SQS = (*HOURGLASS_SQS, HOLD_SQS)
MEMORY_GB = {
    "ingest": INGEST.memory_mb / 1024,
    "dispatcher": DISPATCHER.memory_mb / 1024,
    "sweeper": SWEEPER.memory_mb / 1024,
    "sweeper fan-out": SWEEPER.memory_mb / 1024,
}


# What a message costs on each path when nothing goes wrong (docs/design.md): written, started, done;
# written with index keys, started (index keys removed), done.
BASE_WRITES = {"hand-off": 3.0 + LIST_INDEX_WRITES, "swept": SWEEP_WRITE_BUDGET}


@dataclass
class PathUnits:
    messages: int = 0
    write: float = 0.0
    read: float = 0.0
    over_base: list[str] = field(default_factory=list)


def section(run: Run) -> Section:
    result = Section("cost", "3. Cost per delivered message (counted in the precision run)")
    paths = _paths(run)
    shared = _delta(run, "dynamodb")
    sqs = _delta(run, "sqs")
    lambdas = _delta(run, "lambdas")
    delivered = max(1, run.delivered)
    runs = lambdas.get("sweeper", (0, 0.0))[0]
    handoff, swept = paths["hand-off"], paths["swept"]
    due_reads = shared.get("query due", (0.0, 0.0, 0))[1]
    queue_reads = shared.get("queue settings", (0.0, 0.0, 0))[1]
    state = shared.get("sweeper state", (0.0, 0.0, 0))
    per_handoff_write = handoff.write / max(1, handoff.messages)
    per_swept_write = swept.write / max(1, swept.messages)
    queue_share = queue_reads / max(1, handoff.messages + swept.messages)
    per_swept_read = (swept.read + due_reads + state[1]) / max(1, swept.messages) + queue_share
    hourglass_sqs = sum(sqs.get(name, 0) for name in HOURGLASS_SQS)
    invocations = sum(count for count, _ in lambdas.values())
    errors = run.meter.capacity.errors

    result.check("metering errors", len(errors), budget="0", passed=not errors)
    result.at_most(
        "hand-off path: write units per message",
        per_handoff_write,
        "WU",
        HANDOFF_WRITE_BUDGET,
        required=handoff.messages > 0,
    )
    result.check("hand-off path: read units per message", handoff.read / max(1, handoff.messages) + queue_share, "RU")
    result.at_most(
        "sweep path: write units per message", per_swept_write, "WU", SWEEP_WRITE_BUDGET, required=swept.messages > 0
    )
    result.at_most(
        "sweep path: read units per message", per_swept_read, "RU", SWEEP_READ_BUDGET, required=swept.messages > 0
    )
    counters = shared.get("status counters", (0.0, 0.0, 0))
    result.at_most("status counters: write units per message", counters[0] / delivered, "WU", COUNTER_WRITE_BUDGET)
    bookkeeping = f"{state[0] / max(1, runs):.2f} WU + {state[1] / max(1, runs):.2f} RU"
    result.check("sweeper bookkeeping per run (fixed)", bookkeeping)
    result.at_most("SQS requests per message (send, receive, delete)", hourglass_sqs / delivered, "", SQS_BUDGET)
    result.check("SQS visibility changes per message (the dispatchers' hold)", sqs.get(HOLD_SQS, 0) / delivered)
    result.at_most("Lambda invocations per message", invocations / delivered, "", LAMBDA_BUDGET)
    idle_per_hour = sqs.get("ReceiveMessage (empty)", 0) / max(1e-9, run.seconds) * 3600
    result.check("empty receives of the idle pollers (fixed, per hour)", idle_per_hour)
    result.check("target SendMessage per SQS-target delivery (the delivery itself)", _target_sends(run, sqs))

    dollars = _dollars(run, paths, shared, sqs, lambdas)
    for name, value in dollars.items():
        result.check(f"US$ per million messages: {name}", value)
    for kind, price in target_costs(dollars["Hourglass total"]).items():
        result.check(f"US$ per million messages to a {kind} target (Hourglass + its service's charge)", price)
    result.check("US$ per million: EventBridge Scheduler, one-time schedules", PRICE_SCHEDULER_INVOCATION * 1e6)
    result.check(
        "US$ per million: Step Functions Standard, Wait + delivery task (≥ 2 transitions)",
        2 * PRICE_STEP_TRANSITION * 1e6,
    )

    result.data.update(
        {
            "messages": {"delivered": run.delivered, "hand_off": handoff.messages, "swept": swept.messages},
            "dynamodb": {
                "hand_off_per_message": {"write": per_handoff_write, "read": handoff.read / max(1, handoff.messages)},
                "swept_per_message": {"write": per_swept_write, "read": per_swept_read},
                "shared": {k: {"write": v[0], "read": v[1], "requests": v[2]} for k, v in shared.items()},
                "errors": errors[:10],
                "over_base": {name: p.over_base[:20] for name, p in paths.items()},
            },
            "sqs_requests": sqs,
            "lambda": {k: {"invocations": c, "seconds": round(s, 2)} for k, (c, s) in lambdas.items()},
            "sweeper_runs": runs,
            "usd_per_million": dollars,
        }
    )
    result.notes += [
        f"{run.delivered:,} messages delivered in {run.seconds:.0f} s: {handoff.messages:,} handed off at ingest, "
        f"{swept.messages:,} swept; {run.posts} POSTs, {runs} sweeper runs, "
        f"{lambdas.get('dispatcher', (0, 0))[0]} dispatcher invocations.",
        "Write and read units follow DynamoDB's published rules applied to every request the Store made "
        "(bench/capacity_units.py); failed conditional writes are included.",
        f"Per-message write figures include {LIST_INDEX_WRITES:g} WU for the list indexes: order=due +1 WU, "
        "order=created +1 WU more unless switched off (hourglass:order_created false); "
        "the status counters are shown apart (one ADD per request and per dispatcher batch, whatever the queue's "
        "size).",
        "Per-message DynamoDB figures are the message items and the due index; the sweeper's own state is a fixed "
        "cost per run, shown apart (and included in the dollars).",
        "Empty receives are the fixed cost of the event source's long polling, per hour whatever the traffic; "
        "the target SendMessage is the SQS delivery itself: neither is in the per-message SQS figure.",
        f"Prices are us-east-1 on-demand list prices as checked on {PRICES_CHECKED} (sources in bench/cost.py).",
        "Per target type: the measured Hourglass total plus the target service's list price for one delivery "
        "(payloads up to 64 KB; SNS and EventBridge bill each further 64 KB as one more; Step Functions counts "
        "one Standard state transition, the machine's own are the receiver's).",
        "Sweeper runs are every "
        f"{run.config.sweep_interval:g} s here (60 s in the stack), so their share per message is far above a "
        "deployment's; Lambda duration is the measured handler time at each function's memory size.",
    ]
    return result


def _paths(run: Run) -> dict[str, PathUnits]:
    keys, _ = run.meter.capacity.snapshot()
    paths: dict[str, PathUnits] = defaultdict(PathUnits)
    for key, units in keys.items():
        message_id = key[1].removeprefix(MESSAGE_PREFIX)
        posted = run.posted.get(message_id)
        if posted is None:
            continue
        path = paths[posted.path]
        path.messages += 1
        path.write += units.write
        path.read += units.read
        if units.write > BASE_WRITES.get(posted.path, units.write):
            trail = ", ".join(run.meter.capacity.trail.get(key, []))
            path.over_base.append(f"{message_id}: {units.write:g} WU ({trail})")
    return paths


def _delta(run: Run, kind: str) -> dict[str, Any]:
    before, after = run.baseline[kind], run.final[kind]
    if kind == "sqs":
        return {k: v - before.get(k, 0) for k, v in after.items()}
    zero = tuple(0 for _ in next(iter(after.values()), ()))
    return {k: tuple(a - b for a, b in zip(v, before.get(k, zero), strict=True)) for k, v in after.items()}


def _target_sends(run: Run, sqs: dict[str, int]) -> float:
    sqs_targets = sum(1 for p in run.posted.values() if p.queue == "sqs")
    return sqs.get("SendMessage", 0) / max(1, sqs_targets)


def target_costs(hourglass_total: float) -> dict[str, float]:
    """US$ per million messages to each target type: Hourglass's own measured cost, plus what the target's
    service charges for one delivery of a payload up to 64 KB (TARGET_PRICES)."""
    return {kind: round(hourglass_total + price * 1e6, 3) for kind, price in TARGET_PRICES.items()}


def _dollars(
    run: Run, paths: dict[str, PathUnits], shared: dict[str, Any], sqs: dict[str, int], lambdas: dict[str, Any]
) -> dict[str, float]:
    million = 1e6 / max(1, run.delivered)
    writes = sum(p.write for p in paths.values()) + sum(v[0] for v in shared.values())
    reads = sum(p.read for p in paths.values()) + sum(v[1] for v in shared.values())
    requests = sum(sqs.get(name, 0) for name in BILLED_SQS)
    invocations = sum(count for count, _ in lambdas.values())
    gb_seconds = sum(seconds * MEMORY_GB.get(name, 0.5) for name, (_, seconds) in lambdas.items())
    figures = {
        "DynamoDB": (writes * PRICE_WRITE_UNIT + reads * PRICE_READ_UNIT) * million,
        "SQS": requests * PRICE_SQS_REQUEST * million,
        "Lambda requests": invocations * PRICE_LAMBDA_REQUEST * million,
        "Lambda duration": gb_seconds * PRICE_LAMBDA_GB_SECOND * million,
    }
    figures["Hourglass total"] = sum(figures.values())
    return {k: round(v, 3) for k, v in figures.items()}
