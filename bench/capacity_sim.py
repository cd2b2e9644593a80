"""A discrete-event model of Hourglass at AWS scale: sweeper fan-out, timer packs, the SQS event source
and the dispatcher, against DynamoDB's partition limits (docs/capacity.md has the formulas).

Write units per message come from the cost benchmark; the AWS services' latencies and the event
source's ramp are assumptions (published or typical figures), because the emulator cannot measure
them. `python -m bench.capacity_sim` prints both scenarios for both configurations.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

from hourglass.core import due_width, fanout

from bench import capacity_items
from bench.report import Section, percentile


@dataclass(frozen=True)
class Config:
    shards: int = 8  # the due index's narrowest width (buckets widen with their entries: core.due_width)
    bucket_seconds: int = 60
    sweep_interval: float = 60.0
    lookahead: float = 300.0
    sweep_capacity: int = 20_000  # HOURGLASS_SWEEP_CAPACITY: claims one invocation takes on per run
    run_budget: float = 50.0  # seconds of a 60 s sweeper invocation spent claiming
    claim_rate: float = 2_000.0  # claims/s per invocation: 16 threads x ~8 ms conditional writes (assumed)
    claim_share: float = 0.5  # of the table's write quota the claims may use before throttling paces them
    invoke_latency: float = 0.2  # asynchronous Invoke until a fan-out invocation runs (assumed)
    head_start: float = 1.0  # a timer is visible this long before its first message is due
    begin_lead: float = 0.25
    pack: int = 10
    pack_span: float = 1.0
    batch: int = 10  # timer messages per dispatcher invocation (the event source's batch size)
    dispatch_threads: int = 32
    write_latency: float = 0.008  # one DynamoDB conditional write (assumed)
    target_latency: float = 0.050  # the HTTP target's answer (assumed)
    esm_start: int = 5  # concurrent batches of an idle SQS event source
    esm_per_minute: int = 300  # added per minute while messages wait
    esm_max: int = 1_000
    partition_wru: int = 1_000  # per partition, table and each GSI
    table_wru_quota: int = 40_000  # on-demand, per table and second (adjustable)


@dataclass(frozen=True)
class Costs:
    """Write units of a swept message, measured: on the table (put, claim, begin, finish), on the due index."""

    table: float = 4.0
    index: float = 2.0


@dataclass
class Outcome:
    messages: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_s: float
    # The cold start: what was due in the first minute of the load, and after it.
    lateness_p99_first_minute_ms: float
    lateness_p99_after_ms: float
    sweeper_invocations_max: int
    dispatcher_concurrency_max: int
    dispatcher_invocations: int
    table_wru_peak: float
    index_partition_wru_peak: float
    within_dynamodb_limits: bool


def simulate(config: Config, dues: list[float], costs: Costs | None = None) -> Outcome:
    """`dues` sorted, in seconds after the first sweep; every message was scheduled well before."""
    costs = costs or Costs()
    handoff, sweepers = _sweeps(config, dues)
    packs = _packs(config, dues, handoff)
    lateness, begins, concurrency, invocations = _dispatch(config, dues, packs)
    table: dict[int, float] = defaultdict(float)
    index: dict[tuple[int, int], float] = defaultdict(float)
    for t in handoff:
        table[int(t)] += 1  # the claim
    # Each due bucket as wide as its entries make it (core.due_width: the writers widened it as they wrote).
    buckets = Counter(int(due // config.bucket_seconds) for due in dues)
    widths = {bucket: due_width.width_for(count, config.shards) for bucket, count in buckets.items()}
    for i, t in begins:
        table[int(t)] += costs.table - 2  # begin and finish (the put was written at ingest)
        bucket = int(dues[i] // config.bucket_seconds)
        # The entry's delete, in its bucket's partition (a random id's shard: i stands in for its hash).
        index[(int(t), bucket * 100_000 + i % widths[bucket])] += costs.index - 1
    table_peak, index_peak = max(table.values(), default=0.0), max(index.values(), default=0.0)
    # `_dispatch` appends each delivery's lateness as it records its begin.
    start = dues[0] if dues else 0.0
    early = [lag for (i, _), lag in zip(begins, lateness, strict=True) if dues[i] - start < 60]
    late = [lag for (i, _), lag in zip(begins, lateness, strict=True) if dues[i] - start >= 60]
    return Outcome(
        messages=len(dues),
        lateness_p50_ms=round(percentile(lateness, 50) * 1000, 1),
        lateness_p99_ms=round(percentile(lateness, 99) * 1000, 1),
        lateness_max_s=round(max(lateness, default=math.nan), 2),
        lateness_p99_first_minute_ms=round(percentile(early, 99) * 1000, 1),
        lateness_p99_after_ms=round(percentile(late, 99) * 1000, 1) if late else 0.0,
        sweeper_invocations_max=max(sweepers, default=0),
        dispatcher_concurrency_max=concurrency,
        dispatcher_invocations=invocations,
        table_wru_peak=table_peak,
        index_partition_wru_peak=index_peak,
        within_dynamodb_limits=table_peak <= config.table_wru_quota and index_peak <= config.partition_wru,
    )


def _sweeps(config: Config, dues: list[float]) -> tuple[list[float], list[int]]:
    """When each message is handed off: runs every interval, fanned out by the previous run's count."""
    handoff = [math.inf] * len(dues)
    sweepers: list[int] = []
    first, last_read, lagging = 0, 0, False
    t = dues[0] - config.lookahead - config.sweep_interval if dues else 0.0
    while first < len(dues):
        window = [i for i in range(first, bisect.bisect_right(dues, t + config.lookahead)) if handoff[i] == math.inf]
        invocations = fanout.invocation_count(last_read, config.sweep_capacity, config.shards, lagging=lagging)
        sweepers.append(invocations)
        shares: dict[int, list[int]] = {}
        for i in window:
            shares.setdefault((i % config.shards) % invocations, []).append(i)
        lagging = False
        # Throttling (and the SDK's backoff) paces claims beyond the table's share of write capacity.
        rate = min(config.claim_rate, config.table_wru_quota * config.claim_share / max(1, len(shares)))
        for part, mine in shares.items():
            start = t + (config.invoke_latency if part else 0.0)
            claimable = int(config.run_budget * rate)
            lagging |= len(mine) > claimable
            for rank, i in enumerate(mine[:claimable]):
                handoff[i] = start + (rank + 1) / rate
        last_read = len(window)
        while first < len(dues) and handoff[first] != math.inf:
            first += 1
        t += config.sweep_interval
    return handoff, sweepers


def _packs(config: Config, dues: list[float], handoff: list[float]) -> list[tuple[float, list[int]]]:
    """(visible at, messages): timers sent in the same batch and due within the span share a pack."""
    order = sorted(range(len(dues)), key=lambda i: (round(handoff[i], 1), dues[i]))
    packs: list[tuple[float, list[int]]] = []
    current: list[int] = []
    for i in order:
        first = current[0] if current else i
        if current and (
            len(current) >= config.pack
            or dues[i] - dues[first] >= config.pack_span
            or round(handoff[i], 1) != round(handoff[first], 1)
        ):
            packs.append(_visible(config, dues, handoff, current))
            current = []
        current.append(i)
    if current:
        packs.append(_visible(config, dues, handoff, current))
    packs.sort(key=lambda pack: pack[0])
    return packs


def _visible(config: Config, dues: list[float], handoff: list[float], pack: list[int]) -> tuple[float, list[int]]:
    sent = max(handoff[i] for i in pack)
    delay = min(900, max(0, math.floor(dues[pack[0]] - sent - config.head_start)))
    return sent + delay, pack


def _dispatch(
    config: Config, dues: list[float], packs: list[tuple[float, list[int]]]
) -> tuple[list[float], list[tuple[int, float]], int, int]:
    """The event source hands visible packs to invocations as fast as its concurrency allows."""
    lateness: list[float] = []
    begins: list[tuple[int, float]] = []
    running: list[float] = []  # end times
    limit = float(config.esm_start)
    peak = invocations = 0
    clock = 0.0
    taken = 0
    while taken < len(packs):
        clock = max(clock, packs[taken][0])
        while running and running[0] <= clock:
            heapq.heappop(running)
        if len(running) >= int(limit):
            limit = min(config.esm_max, limit + config.esm_per_minute / 60 * (running[0] - clock))
            clock = running[0]
            continue
        refs: list[int] = []
        for _ in range(config.batch):
            if taken >= len(packs) or packs[taken][0] > clock:
                break
            refs += packs[taken][1]
            taken += 1
        heapq.heappush(running, _invocation(config, dues, clock, refs, lateness, begins))
        invocations += 1
        peak = max(peak, len(running))
    return lateness, begins, peak, invocations


def _invocation(
    config: Config,
    dues: list[float],
    start: float,
    refs: list[int],
    lateness: list[float],
    begins: list[tuple[int, float]],
) -> float:
    threads = [start] * min(config.dispatch_threads, len(refs))
    end = start
    for i in sorted(refs, key=lambda r: dues[r]):
        begin = max(heapq.heappop(threads), dues[i] - config.begin_lead)
        delivered = max(dues[i], begin + config.write_latency)
        lateness.append(delivered - dues[i])
        begins.append((i, begin))
        done = delivered + config.target_latency + config.write_latency
        heapq.heappush(threads, done)
        end = max(end, done)
    return end


def sustained(rate: float, seconds: float, *, lead: float = 900.0) -> list[float]:
    return [lead + i / rate for i in range(int(rate * seconds))]


def burst(count: int, *, within: float = 60.0, lead: float = 900.0, seed: int = 5) -> list[float]:
    rnd = random.Random(seed)
    return sorted(lead + rnd.uniform(0, within) for _ in range(count))


SCENARIOS = {
    "10,000 deliveries/s for 2 min": lambda: sustained(10_000, 120),
    "1,000,000 due in one minute": lambda: burst(1_000_000),
}
CONFIGS = {
    "stack defaults (buckets widen from 8 shards), idle event source": Config(),
    "defaults, table quota 80k WRU/s, idle event source": Config(table_wru_quota=80_000),
    "same, event source already scaled": Config(table_wru_quota=80_000, esm_start=600),
}


def section(costs: Costs | None = None, *, scale: float = 1.0) -> Section:
    """Both scenarios under both configurations; `scale` < 1 thins the workloads (for the smoke test)."""
    result = Section("capacity", "6. Capacity model (simulation; assumptions in docs/capacity.md)")
    rows = []
    for scenario, make in SCENARIOS.items():
        dues = make()[:: max(1, round(1 / scale))]
        for name, config in CONFIGS.items():
            outcome = simulate(config, dues, costs)
            rows.append({"scenario": scenario, "config": name, **asdict(outcome)})
            limits = "within" if outcome.within_dynamodb_limits else "OVER"
            result.check(
                f"{scenario}: {name}",
                f"lateness p99 {outcome.lateness_p99_ms:,.0f} ms (first minute "
                f"{outcome.lateness_p99_first_minute_ms:,.0f} ms, after {outcome.lateness_p99_after_ms:,.0f} ms), "
                f"max {outcome.lateness_max_s:,.1f} s; "
                f"{outcome.sweeper_invocations_max} sweepers, {outcome.dispatcher_concurrency_max} dispatchers; "
                f"table {outcome.table_wru_peak:,.0f} WRU/s, due-index shard {outcome.index_partition_wru_peak:,.0f} "
                f"WRU/s ({limits} DynamoDB limits)",
            )
    result.data.update({"rows": rows, "configs": {k: asdict(v) for k, v in CONFIGS.items()}})
    result.data["costs"] = asdict(costs or Costs())
    result.notes.append("A model, not a measurement: AWS latencies and the event source's ramp are assumptions.")
    per_item = capacity_items.section()
    result.checks += per_item.checks
    result.notes += per_item.notes
    result.data["per_item"] = per_item.data
    return result


def main() -> int:
    print(section().markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
