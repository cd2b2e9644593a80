"""Ordered delivery per key (v1.3): promptness (a key's head ends, its next message starts), 1,000 keys of 10
messages against the same set without ordering, and the write units ordering adds per message.

Promptness runs through the local runtime in real time; the write units are counted in process on a fixed clock
(`delivery_limits.units_per_message`). Run alone: `python -m bench --only ordering`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bench.delivery_limits import units_per_message, with_runtime
from bench.receiver import Counting
from bench.report import Section
from devstack.api_call import document

ORDERED = {"ordering": {"by": "flow_key"}}
# How long the receiver holds each request: the key's next message waits that long behind it.
HOLD_S = 0.2
PROMPT_P99_S = 0.1


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def promptness(api: str, keys: int, per_key: int) -> dict[str, Any]:
    """`keys` keys of `per_key` messages, all due in 3 s (1 ms apart), each request held HOLD_S: per key, the
    time from the end of one request to the arrival of the next (s), and whether each key kept its due order and
    one request at a time."""
    receiver = Counting(hold=HOLD_S).start()
    try:
        name = f"ord{int(time.time() * 1000) % 10**9}"
        document(api, "PUT", f"/v1/queues/{name}", {"target": {"type": "http", "url": receiver.url()}, **ORDERED})
        first = time.time() + 3
        messages = [
            {"body": {"k": k, "i": i}, "flow_key": f"k{k}", "deliver_at": _iso(first + (i * keys + k) / 1000)}
            for i in range(per_key)
            for k in range(keys)
        ]
        for start in range(0, len(messages), 100):
            document(api, "POST", f"/v1/queues/{name}/messages", {"messages": messages[start : start + 100]})
        got = receiver.wait_for(keys * per_key, timeout=60 + keys * per_key * HOLD_S, settle=1.0)
    finally:
        receiver.stop()
    by_key: dict[int, list[tuple[float, int]]] = {}
    for arrived, body in got:
        by_key.setdefault(body["k"], []).append((arrived, body["i"]))
    gaps, in_order, overlaps = [], True, 0
    for arrivals in by_key.values():
        in_order &= [i for _, i in arrivals] == list(range(per_key))
        for (earlier, _), (later, _) in itertools.pairwise(arrivals):
            gap = later - (earlier + HOLD_S)
            overlaps += gap < 0
            gaps.append(max(0.0, gap))
    orders = {k: [i for _, i in arrivals] for k, arrivals in by_key.items()}
    return {"delivered": len(got), "in_order": in_order, "overlaps": overlaps, "gaps": gaps, "orders": orders}


def section(*, quick: bool = False) -> Section:
    out = Section("ordering", "ordered delivery per key: promptness, 1,000 keys x 10 messages, write units")
    # One key alone (the budget is for a quiet run), then several side by side (their writes share the emulator).
    # 101 messages: 100 gaps, so the p99 is not simply the slowest one.
    cases = ((1, 5), (3, 4)) if quick else ((1, 101), (5, 10))
    runs: dict[str, dict[str, Any]] = {}

    def work(api: str) -> None:
        for keys, per_key in cases:
            runs[f"{keys}x{per_key}"] = promptness(api, keys, per_key)

    with_runtime(work)
    for index, (keys, per_key) in enumerate(cases):
        run = runs[f"{keys}x{per_key}"]
        label = f"{keys} key{'s' if keys > 1 else ''} x {per_key}, each request held {HOLD_S:g} s"
        good = run["in_order"] and run["overlaps"] == 0
        out.check(f"{label}: delivered", f"{run['delivered']} of {keys * per_key}")
        out.check(f"{label}: every key in due order, one at a time", str(good), budget="True", passed=good)
        if not run["gaps"]:
            continue
        out.check(f"{label}: head's end to next start, p50", round(percentile(run["gaps"], 0.5) * 1000, 1), "ms")
        p99 = round(percentile(run["gaps"], 0.99) * 1000, 1)
        if index == 0:
            out.at_most(f"{label}: head's end to next start, p99", p99, "ms", PROMPT_P99_S * 1000)
        else:
            out.check(f"{label}: head's end to next start, p99", p99, "ms")
        out.data[f"gaps_ms_{keys}x{per_key}"] = [round(g * 1000, 1) for g in run["gaps"]]
    many_keys, many = (100, 10) if quick else (1_000, 10)
    count = many_keys * many
    rows = []
    for label, control in (("without ordering", {}), ("ordering", ORDERED)):
        started = time.perf_counter()
        total, _ = units_per_message(control, count, swept=False, flow_keys=many_keys)
        rows.append([label, f"{total:.2f}", f"{time.perf_counter() - started:.1f}"])
        runs[label] = {"wu": total}
    added = runs["ordering"]["wu"] - runs["without ordering"]["wu"]
    out.check(
        f"{many_keys:,} keys x {many}: WU per message without ordering", round(runs["without ordering"]["wu"], 2), "WU"
    )
    out.check(f"{many_keys:,} keys x {many}: WU per message with ordering", round(runs["ordering"]["wu"], 2), "WU")
    out.at_most(
        f"{many_keys:,} keys x {many}: WU per message added by ordering", round(added, 2), "WU", 2.0, shown="+2"
    )
    out.data["table"] = {"header": ["queue", "WU per message", "seconds (in process)"], "rows": rows}
    out.notes.append(
        "Write units: in process on a fixed clock, every message of a key due 1 ms after the one of the key before "
        "(the keys interleaved), delivered at once. A key's order item is written when a message takes a free key "
        "(1 WU) or joins the line behind a head (1 WU), and when its head ends (1 WU: the key handed on, or the "
        "item deleted when nothing waits, so an idle key keeps nothing). A queue without ordering writes nothing "
        "more. Promptness: through the local runtime, the gap between the end of one request of a key (its "
        "arrival + the hold) and the arrival of the next: the outcome write, the key's write, the woken message's "
        "timer (sent with no delay) and its attempt. A few keys at once, as the budget is for a quiet run: every "
        "key's chain of writes goes through the one emulator process, so many keys at once measure its throughput."
    )
    return out


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
