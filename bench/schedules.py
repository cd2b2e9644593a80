"""Target 4b, schedules: lateness of scheduled occurrences beside one-off messages, and what an occurrence costs.

Through the local runtime in real time, like precision: `every: 60` schedules whose starts are spread
over a minute, and as many one-off messages due over the same minutes, all to one loopback receiver.
Lateness = the receiver's clock when the request arrived - the due time. DynamoDB units are counted
per message item (bench.capacity_units); the chaining's units (the schedule reads of the claim and of the
attempt, the chain repair's round and its position item) are the `schedule items` use; SQS requests and
Lambda invocations are the run's, per delivered message.
"""

from __future__ import annotations

import random
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bench import cost
from bench.capacity_units import Units
from bench.precision import BATCH, check_lateness, local_runtime
from bench.receiver import Receiver
from bench.report import Section
from bench.runtime_meter import RuntimeMeter
from devstack.api_call import document
from devstack.runtime import Runtime


@dataclass(frozen=True)
class SchedulesConfig:
    schedules: int = 60
    rounds: int = 2  # occurrences measured per schedule
    every: int = 60
    lead: float = 15.0  # the first start is this far ahead: past the ingest hand-off window (swept, as the rest)
    spread: float = 60.0  # the schedules' starts are spread over this many seconds
    sweep_interval: float = 2.0
    lookahead: float = 10.0
    handoff_safety: float = 1.0
    shards: int = 4
    settle: float = 4.0
    seed: int = 20261124
    # The run under load, after the quiet one: the same schedules beside `load` times as many one-off
    # messages, their starts and the one-offs' due times packed into `load_spread` seconds.
    load: int = 4
    load_spread: float = 20.0


# No loaded run in the smoke test (`make test`): it would add a runtime's worth of seconds to its budget.
QUICK = SchedulesConfig(
    schedules=4, rounds=1, lead=3.0, spread=2.0, sweep_interval=1.0, lookahead=4.0, settle=3.0, load=0
)
# Occurrences are as precise as one-off messages of the same run: p99 at most this much later.
P99_MARGIN_MS = 20.0
# Issue 35: a schedule occurrence costs at most this many US$ per million, on-demand.
OCCURRENCE_BUDGET = 2.00
# ... and its chaining (the schedule reads and writes of the chain and of its repair) reads far fewer than the
# 35 read units it did before.
CHAINING_READ_BUDGET = 5.0


@dataclass(frozen=True)
class Phase:
    """One run's queues: `scheduled<tag>` with the schedules, `oneoff<tag>` with `per` one-offs per occurrence."""

    tag: str = ""
    per: int = 1


@dataclass(frozen=True)
class Measured:
    due: dict[str, float]  # id -> due time (epoch seconds)
    arrived: dict[str, float]

    def lateness(self) -> list[float]:
        return [self.arrived[i] - due for i, due in self.due.items() if i in self.arrived]


def run(config: SchedulesConfig) -> Section:
    with local_runtime(config, dispatcher_threads=8) as (runtime, receiver):
        section = _measure(config, runtime, receiver)
        if config.load:
            _measure_loaded(section, config, runtime, receiver)
        return section


def _measure_loaded(section: Section, config: SchedulesConfig, runtime: Runtime, receiver: Receiver) -> None:
    """The same comparison with `load` times as many one-off messages due in the same seconds."""
    loaded = replace(config, spread=config.load_spread)
    started = time.time()
    occurrences, oneoff = _phase(loaded, runtime.api_url, receiver, Phase("-load", config.load))
    measured = {"occurrences": Measured(occurrences, receiver.arrived), "one-off": Measured(oneoff, receiver.arrived)}
    figures = {
        kind: check_lateness(section, f"under load, {kind}", m.lateness(), len(m.due), judged=False)
        for kind, m in measured.items()
    }
    _margin(section, "under load, ", figures)
    section.data["loaded"] = {"targets": figures, "wall_seconds": round(time.time() - started, 1)}
    section.notes.append(
        f"Under load: the same schedules with starts spread over {config.load_spread:g} s, beside {config.load} "
        "one-off messages per occurrence due uniformly over the same span."
    )


def _margin(section: Section, label: str, figures: dict[str, dict[str, Any]]) -> None:
    """Occurrence p99 against one-off p99 of the same run."""
    gap = figures["occurrences"]["p99_ms"] - figures["one-off"]["p99_ms"]
    section.at_most(f"{label}occurrence p99 - one-off p99", gap, "ms", P99_MARGIN_MS)


def _measure(config: SchedulesConfig, runtime: Runtime, receiver: Receiver) -> Section:
    meter = RuntimeMeter(runtime).attach()
    started = time.time()
    counts: list[dict[str, Any]] = []
    occurrences, oneoff = _phase(config, runtime.api_url, receiver, Phase(), lambda: counts.append(meter.counts()))
    baseline, created, final = counts
    keys, _ = meter.capacity.snapshot()
    measured = {
        "occurrences": Measured(occurrences, receiver.arrived),
        "one-off": Measured(oneoff, receiver.arrived),
    }
    swept = {k[1][2:] for k, indexed in meter.capacity.indexed_at_ingest.items() if indexed}
    units = {
        "occurrences": _units(keys, occurrences, receiver.arrived),
        "one-off": _units(keys, {i: d for i, d in oneoff.items() if i in swept}, receiver.arrived),
    }
    section = _section(config, measured, units, receiver.duplicates)
    _margin(section, "", section.data["targets"])
    _costs(section, (baseline, created, final), units["occurrences"], len(receiver.arrived), config.schedules)
    section.data["wall_seconds"] = round(time.time() - started, 1)
    return section


def _phase(
    config: SchedulesConfig, api: str, receiver: Receiver, phase: Phase, mark: Callable[[], None] = lambda: None
) -> tuple[dict[str, float], dict[str, float]]:
    """Creates the phase's queues and schedules and posts its one-offs, waits for their deliveries, deletes the
    schedules; returns the measured occurrences' and one-offs' due times by id. `mark` is called before the
    schedules are created, after, and at the end (the meter's counts)."""
    scheduled, oneoff_queue = f"scheduled{phase.tag}", f"oneoff{phase.tag}"
    for queue in (scheduled, oneoff_queue):
        document(api, "PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": receiver.url}})
    mark()
    started = time.time()
    starts = [started + config.lead + i * config.spread / config.schedules for i in range(config.schedules)]
    for i, start in enumerate(starts):
        doc = {"every": config.every, "start_at": _rfc3339(start), "body": {"schedule": i}}
        document(api, "PUT", f"/v1/queues/{scheduled}/schedules/s{i}", doc)
    mark()
    last_due = starts[-1] + config.every * (config.rounds - 1)
    oneoff = _post_oneoffs(config, api, oneoff_queue, (starts[0], last_due), phase.per)
    expected = len(oneoff) + config.schedules * config.rounds
    arrived = len(receiver.arrived)
    while time.time() < last_due + config.settle and len(receiver.arrived) - arrived < expected:
        time.sleep(0.5)
    time.sleep(1.0)  # the last deliveries' bookkeeping
    mark()
    listed = _list(api, scheduled)
    for i in range(config.schedules):
        document(api, "DELETE", f"/v1/queues/{scheduled}/schedules/s{i}", None)
    return {m["id"]: _epoch(m["due_at"]) for m in listed if _epoch(m["due_at"]) <= last_due + 0.001}, oneoff


def _post_oneoffs(
    config: SchedulesConfig, api: str, queue: str, span: tuple[float, float], per: int
) -> dict[str, float]:
    """`per` one-off messages per occurrence, due uniformly over the same span."""
    rnd = random.Random(config.seed)
    first, last = span
    dues = [rnd.uniform(first, max(first, last)) for _ in range(config.schedules * config.rounds * per)]
    posted: dict[str, float] = {}
    for chunk in range(0, len(dues), BATCH):
        messages = [{"body": {"n": n}, "deliver_at": _rfc3339(d)} for n, d in enumerate(dues[chunk : chunk + BATCH])]
        doc = document(api, "POST", f"/v1/queues/{queue}/messages", {"messages": messages})
        posted.update({m["id"]: _epoch(m["due_at"]) for m in doc["messages"]})
    return posted


def _units(keys: dict[Any, Units], due: dict[str, float], arrived: dict[str, float]) -> dict[str, float]:
    """Mean DynamoDB units of the delivered messages' own items."""
    mine = [u for k, u in keys.items() if k[1][2:] in due and k[1][2:] in arrived]
    count = max(1, len(mine))
    write, read = sum(u.write for u in mine) / count, sum(u.read for u in mine) / count
    return {"messages": len(mine), "write": write, "read": read}


def _section(
    config: SchedulesConfig, measured: dict[str, Measured], units: dict[str, dict[str, float]], duplicates: int
) -> Section:
    section = Section("schedules", "4b. Schedules: occurrences beside one-off messages (local runtime)")
    figures: dict[str, Any] = {}
    for kind, m in measured.items():
        judged = kind == "occurrences"  # one-off messages have their budgets in the precision target
        figures[kind] = check_lateness(section, kind, m.lateness(), len(m.due), judged=judged)
    section.check("duplicate deliveries", duplicates, budget="0", passed=duplicates == 0)
    for kind, u in units.items():
        label = "occurrence" if kind == "occurrences" else "one-off message, sweep path"
        section.check(f"{label}: write units of its item (n={u['messages']:g})", u["write"], "WU")
        section.check(f"{label}: read units of its item (n={u['messages']:g})", u["read"], "RU")
    section.data.update({"config": config.__dict__, "targets": figures, "units": units, "duplicates": duplicates})
    section.notes += [
        f"{config.schedules} schedules, `every: {config.every}`, starts spread over {config.spread:g} s from "
        f"{config.lead:g} s ahead; {config.rounds} occurrence(s) each measured; as many one-off messages due "
        "uniformly over the same span, to the same receiver.",
        "Each occurrence after the first is stored when the sweep claims the one before it (a lookahead before that "
        "one is due, a minute before its own), so occurrences take the sweep path; the one-off figures beside them "
        "are the sweep path's too. Budget: occurrence p99 at most 20 ms above the one-off p99 of the same run.",
    ]
    return section


def _costs(
    section: Section,
    counts: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    occurrence: dict[str, float],
    delivered: int,
    schedules: int,
) -> None:
    """US$ per million occurrences: the occurrence's own units + the chaining's schedule reads + SQS + Lambda.

    `counts` are the meter's counts before the schedules were created, after, and at the end.
    """
    baseline, _, final = counts
    per = 1 / max(1, delivered)
    occurrences = max(1, int(occurrence["messages"]))

    def units(use: str, index: int) -> list[float]:
        return [c["dynamodb"].get(use, (0.0, 0.0, 0))[0 if index == 0 else 1] for c in counts]

    before, puts, after = units("schedule items", 0)
    schedule_write = (after - puts) / occurrences
    section.check("schedule item units per PUT of a schedule", (puts - before) / max(1, schedules), "WU")
    schedule_read = (units("schedule items", 1)[2] - units("schedule items", 1)[1]) / occurrences
    # Attempt history items (and anything else): shared by every delivered message, occurrence or not.
    other_write = (units("other", 0)[2] - units("other", 0)[0]) * per
    other_read = (units("other", 1)[2] - units("other", 1)[0]) * per
    sqs = sum(final["sqs"].get(n, 0) - baseline["sqs"].get(n, 0) for n in cost.HOURGLASS_SQS) * per
    invocations = sum(c - baseline["lambdas"].get(k, (0, 0.0))[0] for k, (c, _) in final["lambdas"].items()) * per
    gb_seconds = per * sum(
        (s - baseline["lambdas"].get(k, (0, 0.0))[1]) * cost.MEMORY_GB.get(k, 0.5)
        for k, (_, s) in final["lambdas"].items()
    )
    writes = occurrence["write"] + schedule_write + other_write
    reads = occurrence["read"] + schedule_read + other_read
    dollars = {
        "DynamoDB": (writes * cost.PRICE_WRITE_UNIT + reads * cost.PRICE_READ_UNIT) * 1e6,
        "SQS": sqs * cost.PRICE_SQS_REQUEST * 1e6,
        "Lambda requests": invocations * cost.PRICE_LAMBDA_REQUEST * 1e6,
        "Lambda duration": gb_seconds * cost.PRICE_LAMBDA_GB_SECOND * 1e6,
    }
    total = sum(dollars.values())
    section.check("schedule item units per occurrence (chaining)", f"{schedule_write:.2f} WU + {schedule_read:.2f} RU")
    section.at_most("read units of the chaining per occurrence", schedule_read, "RU", CHAINING_READ_BUDGET)
    section.check("units per occurrence, all told", f"{writes:.2f} WU + {reads:.2f} RU")
    for name, (calls, seconds) in sorted(final["lambdas"].items()):
        before_calls, before_seconds = baseline["lambdas"].get(name, (0, 0.0))
        section.check(
            f"Lambda {name}: invocations, seconds per delivered message",
            f"{(calls - before_calls) * per:.3f}, {(seconds - before_seconds) * per:.3f} s",
        )
    section.check("attempt history units per delivered message", f"{other_write:.2f} WU + {other_read:.2f} RU")
    section.check("SQS requests per delivered message", sqs)
    section.check("Lambda invocations per delivered message", invocations)
    for name, value in dollars.items():
        section.check(f"US$ per million occurrences: {name}", value)
    section.at_most("US$ per million occurrences: Hourglass total, on-demand", total, "", OCCURRENCE_BUDGET)
    dollars["Hourglass total"] = total
    section.check("US$ per million: EventBridge Scheduler invocations", cost.PRICE_SCHEDULER_INVOCATION * 1e6)
    section.data["per_occurrence"] = {
        "write": writes,
        "read": reads,
        "schedule_write": schedule_write,
        "schedule_read": schedule_read,
        "history_write": other_write,
        "sqs_requests": sqs,
        "lambda_invocations": invocations,
        "usd_per_million": {k: round(v, 3) for k, v in dollars.items()},
    }
    section.notes += [
        "SQS requests and Lambda invocations are the run's per delivered message (occurrences and one-offs share "
        "the timer queue and functions); sweeper runs are every few seconds here, 60 s in the stack.",
        f"Budgets (issue 35): at most US$ {OCCURRENCE_BUDGET:.2f} per million occurrences on-demand, and at most "
        f"{CHAINING_READ_BUDGET:g} read units of chaining per occurrence (35 before). An occurrence is a message "
        "on the sweep path: its writes are the sweep path's (docs/design.md, 'Paths and their costs').",
    ]


def _list(api: str, queue: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
        doc = document(api, "GET", f"/v1/queues/{queue}/messages?{urllib.parse.urlencode(query)}", None)
        found += doc["messages"]
        cursor = doc.get("next_cursor")
        if not cursor:
            return found


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(round(epoch, 3), UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
