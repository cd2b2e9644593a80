"""Flow keys (v1.2): per-key rate accuracy, isolation of a quiet key beside a saturated one, write units per
message of key-limited queues next to an unlimited one, and what 10,000 distinct keys cost a sweep.

In process on a fixed clock (`delivery_limits.units_per_message`): the figures are the allocation's and the
store's, not the local runtime's latency; the real-time bounds are checked by tests/e2e/test_flow_keys.py.
Run alone: `python -m bench --only flow_keys`.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from typing import Any

from hourglass.core.pacing import Item, Rates, Start, allocate_scoped

from bench.delivery_limits import WINDOWS, units_per_message, window_ratio
from bench.report import Section

KEY_RATE = 5.0
# The queue-wide rate_limit beside KEY_RATE in the second isolation figure: room for the quiet key's starts
# beside the saturated key's (5 a second), which a single queue cursor would put behind all of them.
QUEUE_RATE = 20.0
# Both key limits: a concurrency the key's rate cannot reach within a lease (no slot writes), and one it can.
WIDE = {"flow_control": {"key_rate_limit": 1, "key_max_concurrency": 100}}
BOTH = {"flow_control": {"key_rate_limit": 20, "key_max_concurrency": 2}}
T0_MS = 1_900_000_000_000


def accuracy(keys: int, per_key: int) -> float:
    """The worst window / bound over every key of a queue at key_rate_limit KEY_RATE, all due at once."""
    starts: list[tuple[int, Any]] = []
    units_per_message(
        {"flow_control": {"key_rate_limit": KEY_RATE}}, keys * per_key, swept=False, flow_keys=keys, starts=starts
    )
    by_key: dict[int, list[float]] = {}
    for at, body in starts:
        by_key.setdefault(body % keys, []).append(at / 1000)
    return max(window_ratio(times, KEY_RATE, w) for times in by_key.values() for w in WINDOWS)


def isolation(seconds: int, overload: float, queue_rate: float | None = None) -> tuple[float, float]:
    """p99 lateness (s) of a quiet key (one message a second) alone, and beside a key offered `overload` x
    its limit for `seconds`, both handed off as they fall due (one allocation per second, as a sweep or
    ingest would) from the same pacing state; `queue_rate`: the queue's own rate_limit as well."""

    def run(noisy: bool) -> float:
        calendar: dict[Item, tuple[int, ...]] = {}
        lateness = []
        for second in range(seconds):
            now = T0_MS + second * 1000
            batch = [Start(now + 500, "quiet")]
            if noisy:
                batch += [Start(now + i, "noisy") for i in range(int(KEY_RATE * overload))]
            rates = Rates(queue_rate, KEY_RATE)
            got = allocate_scoped(rates, batch, now, known=calendar.get)
            calendar.update(got.moved)
            # The quiet key's attempt may start as late as its slot allows: count its latest start.
            lateness.append((got.slots[0].latest_ms - batch[0].due_ms) / 1000)
        lateness.sort()
        return lateness[min(len(lateness) - 1, math.ceil(0.99 * len(lateness)) - 1)]

    return run(False), run(True)


def many_keys(keys: int) -> dict[str, float]:
    """One allocation over `keys` distinct keys (a sweep chunk's worth at a time, as the sweeper does): the
    memory it takes and the pacing items it writes; it reads none (a conditional write returns the winner)."""
    tracemalloc.start()
    started = time.perf_counter()
    written = 0
    for first in range(0, keys, 500):
        starts = [Start(T0_MS, f"tenant-{i}") for i in range(first, min(keys, first + 500))]
        written += len(allocate_scoped(Rates(None, KEY_RATE), starts, T0_MS, known=lambda item: None).moved)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"peak_kib": peak / 1024, "pacing_items_written": written, "seconds": time.perf_counter() - started}


def section(*, quick: bool = False) -> Section:
    out = Section("flow_keys", "flow keys: per-key accuracy, isolation, write units, 10,000 keys")
    worst = accuracy(3, 10 if quick else 40)
    out.at_most("key_rate_limit 5, 3 keys due at once: worst window / bound", round(worst, 3), "", 1.0)
    for label, queue_rate in (("", None), (f", queue rate_limit {QUEUE_RATE:g}", QUEUE_RATE)):
        alone, beside = isolation(20 if quick else 120, 10.0, queue_rate)
        out.check(f"quiet key alone{label}: p99 lateness", round(alone, 3), "s")
        out.at_most(
            f"quiet key beside a key offered 10x its limit{label}: p99 lateness",
            round(beside, 3),
            "s",
            alone + 1.0,
            shown="alone + 1 s",
        )
    messages = 20 if quick else 100
    rows = []
    for path, swept in (("ingest", False), ("sweep", True)):
        base_reads: dict[str, float] = {}
        base = units_per_message({}, messages, swept=swept, reads=base_reads)[0]
        for label, control, keys in (
            ("key_rate_limit, 1 key", {"flow_control": {"key_rate_limit": 20}}, 1),
            ("key_rate_limit, a key per message", {"flow_control": {"key_rate_limit": 20}}, messages),
            ("key_max_concurrency 2, a key per message", {"flow_control": {"key_max_concurrency": 2}}, messages),
            ("key_rate_limit 1 + key_max_concurrency 100, a key per message", WIDE, messages),
            ("key_rate_limit 20 + key_max_concurrency 2, a key per message", BOTH, messages),
            # One key: its slots are always held, each taken from a holder whose attempt ended (its message read).
            ("key_rate_limit 20 + key_max_concurrency 2, 1 key", BOTH, 1),
        ):
            reads: dict[str, float] = {}
            total, limit_items = units_per_message(control, messages, swept=swept, flow_keys=keys, reads=reads)
            more_reads = sum(reads.values()) - sum(base_reads.values())
            rows.append(
                [
                    label,
                    path,
                    f"{total:.2f}",
                    f"{total - base:+.2f}",
                    f"{sum(limit_items.values()):.2f}",
                    f"{more_reads:+.2f}",
                ]
            )
            # Swept, a limited queue's messages are claimed, an unlimited one's not (`QueueLimits.claims`): +1.
            budget, shown = (3.0, "+2 (+1 claim)") if swept else (2.0, "+2")
            out.at_most(
                f"{label} ({path}): WU per message vs unlimited", round(total - base, 2), "WU", budget, shown=shown
            )
    out.data["table"] = {
        "header": ["queue", "hand-off", "WU per message", "vs unlimited", "limit items WU", "RCU vs unlimited"],
        "rows": rows,
    }
    cost = many_keys(1_000 if quick else 10_000)
    out.check("10,000 distinct keys: allocation memory (peak)", round(cost["peak_kib"]), "KiB")
    out.check("10,000 distinct keys: pacing items read per sweep", 0, budget="0", passed=True)
    out.check(
        "10,000 distinct keys: pacing items written (one per key with a due message)", cost["pacing_items_written"]
    )
    out.notes.append(
        "Accuracy: starts on the fixed clock, one dispatcher at a time; windows of 1, 2, 5 and 10 s. Isolation: the "
        "allocation alone (no runtime), the quiet key's latest allowed start against its due time, so the figure "
        "is what the rule adds, not what SQS and Lambda add. A key's pacing item is written once per hand-off batch "
        "that holds one of its messages (1 WU) and read never (a lost race returns the winner's value); idle keys' "
        "items expire (TTL) an hour after their last slot. A key concurrency slot costs 1 WU per attempt, as the "
        "queue's does: the probed slots and their live holders' messages are read first (strongly consistent, the "
        "RCU column), then one conditional write takes a slot whose lease passed or whose holder's attempt ended; "
        "the outcome frees it, with no release write."
    )
    return out
