"""Delivery windows: lateness at a window opening with a crowd waiting for it (rate-limited and unlimited) through the
local runtime, and the write units of a message deferred by its window next to one always inside it.
"""

from __future__ import annotations

import math
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from hourglass.core.timestamps import format_rfc3339, from_ms
from hourglass.service.context import Context
from hourglass.service.messages import Messages
from hourglass.service.sweep import Sweeper
from moto import mock_aws

from bench import inprocess
from bench.delivery_limits import window_ratio, with_runtime
from bench.inprocess import T0
from bench.receiver import Counting
from bench.report import Section
from devstack.api_call import document

URL = "http://127.0.0.1:9/x"
# T0 is 09:00 UTC; messages are due 30 s later. Each case: its queue's window and how late its messages were
# posted for (seconds after T0): "deferred at admission" goes at 10:00 like "no window, due at 10:00".
CASES: dict[str, tuple[dict[str, Any] | None, int]] = {
    "no window": (None, 30),
    "always inside": ({"from": "00:00", "to": "00:00"}, 30),
    "no window, due at 10:00": (None, 3600),
    "deferred at admission (to 10:00)": ({"from": "10:00", "to": "11:00"}, 30),
    "deferred at the start (window shut at 09:01)": ({"from": "09:00", "to": "09:01"}, 30),
}
LATE_DISPATCH = CASES["deferred at the start (window shut at 09:01)"][0]


# write units ------------------------------------------------------------------------------------
def units_per_message(window: dict[str, Any] | None, count: int, due_after: int = 30) -> float:
    """Write units per delivered message, due `due_after` s after T0 on a queue with `window`: a message whose
    window closes before its start (`LATE_DISPATCH`) is found late by its dispatcher (as after an outage)."""
    with mock_aws():
        metered = inprocess.metered()
        ctx, clock = metered.ctx, metered.clock
        messages = Messages(ctx)
        settings: dict[str, Any] = {"target": {"type": "http", "url": URL}}
        if window is not None:
            settings["window"] = window
        messages.queues.put("q", settings)
        first = T0 + timedelta(seconds=due_after)
        batch = [{"body": i, "deliver_at": _iso(int(first.timestamp() * 1000) + i)} for i in range(count)]
        messages.create("q", {"messages": batch})
        if window is LATE_DISPATCH:
            clock.now = T0 + timedelta(minutes=2)  # the dispatcher comes after the window closed
        metered.drain()
        # What waits for a later opening is swept then, as any message due beyond the lookahead.
        for _ in range(3):
            due = [m.due_at for m in _messages(ctx) if m.status.value == "pending"]
            if not due:
                break
            clock.now = max(clock.now, min(due) - timedelta(seconds=60))
            Sweeper(ctx).run()
            metered.drain()
        keys, _ = metered.meter.snapshot()
        assert not metered.meter.errors, metered.meter.errors
        assert all(m.status.value == "delivered" for m in _messages(ctx)), [m.status for m in _messages(ctx)]
    return sum(u.write for k, u in keys.items() if k[0] == "q") / count


def _iso(ms: int) -> str:
    return format_rfc3339(from_ms(ms))


def _messages(ctx: Context) -> list[Any]:
    return list(ctx.store.list_messages("q", status=None, limit=1000, cursor=None)[0])


# through the local runtime ----------------------------------------------------------------------
def _next_opening(lead: float) -> datetime:
    """The first whole minute at least `lead` seconds ahead (windows open on whole minutes)."""
    soon = datetime.now(UTC) + timedelta(seconds=lead)
    return soon.replace(second=0, microsecond=0) + timedelta(minutes=1)


def measure_opening(api: str, count: int, rate: float | None, *, windowed: bool = True) -> dict[str, Any]:
    """`count` messages due before an opening about a minute away, on a queue whose window opens then: when each
    arrived after the opening, and (rate-limited) the most arrivals in a window over the contract's bound. Not
    `windowed`: the baseline, the same messages all due at that instant on a queue without a window."""
    receiver = Counting().start()
    try:
        opening = _next_opening(45)
        closing = opening + timedelta(minutes=30)
        window = {"timezone": "UTC", "from": opening.strftime("%H:%M"), "to": closing.strftime("%H:%M")}
        name = f"{'window' if windowed else 'instant'}{count}r{rate or 0:g}".replace(".", "_")
        settings: dict[str, Any] = {"target": {"type": "http", "url": receiver.url()}}
        settings.update({"window": window} if windowed else {})
        settings.update({} if rate is None else {"rate_limit": rate})
        document(api, "PUT", f"/v1/queues/{name}", settings)
        first_ms = int((time.time() + 5) * 1000) if windowed else int(opening.timestamp() * 1000)
        for start in range(0, count, 100):
            indices = range(start, min(count, start + 100))
            batch = [{"body": i, "deliver_at": _iso(first_ms + (i if windowed else 0))} for i in indices]
            document(api, "POST", f"/v1/queues/{name}/messages", {"messages": batch})
        budget = (opening - datetime.now(UTC)).total_seconds() + count / (rate or math.inf) + 90
        got = receiver.wait_for(count, timeout=budget)
    finally:
        receiver.stop()
    late = sorted(at - opening.timestamp() for at, _ in got)
    result: dict[str, Any] = {
        "count": count,
        "rate": rate,
        "windowed": windowed,
        "delivered": len({body for _, body in got}),
        "early": sum(1 for x in late if x < -0.005),
        "first_s": late[0],
        "p50_s": statistics.median(late),
        "p99_s": late[max(0, math.ceil(0.99 * len(late)) - 1)],
        "last_s": late[-1],
    }
    if rate is not None:
        starts = [at for at, _ in got]
        result["worst_window_ratio"] = max(window_ratio(starts, rate, w) for w in (1, 2, 5, 10))
        # Past the pacing schedule: the k-th arrival is due at opening + k / rate at the earliest.
        result["beyond_schedule_p99_s"] = sorted(x - k / rate for k, x in enumerate(late))[
            max(0, math.ceil(0.99 * len(late)) - 1)
        ]
    return result


# the section ------------------------------------------------------------------------------------
def section(*, quick: bool = False) -> Section:
    out = Section("windows", "Delivery windows: lateness at an opening with a crowd waiting, write units")
    count = 100 if quick else 1000
    runs: list[dict[str, Any]] = []

    def work(api: str) -> None:
        for rate in (100.0, None):
            for windowed in (True, False):
                runs.append(measure_opening(api, count, rate, windowed=windowed))

    with_runtime(work)
    for run in runs:
        limit = "rate_limit " + format(run["rate"], "g") if run["rate"] else "unlimited"
        crowd = "waiting for an opening" if run["windowed"] else "due at one instant, no window"
        label = f"{run['count']} {crowd}, {limit}"
        complete = run["delivered"] == run["count"]
        out.check(f"{label}: delivered", f"{run['delivered']} of {run['count']}", passed=complete)
        out.check(f"{label}: before the opening", run["early"], budget="0", passed=run["early"] == 0)
        out.check(f"{label}: first arrival after the opening", round(run["first_s"], 3), "s")
        out.check(f"{label}: p50 / p99 / last after the opening",
                  f"{run['p50_s']:.3f} / {run['p99_s']:.3f} / {run['last_s']:.3f}", "s")
        if run["rate"]:
            ratio = run["worst_window_ratio"]
            out.check(f"{label}: most starts in a window / bound", round(ratio, 3), budget="<= 1", passed=ratio <= 1)
            out.check(f"{label}: p99 past its pacing slot (opening + k / rate)", round(run["beyond_schedule_p99_s"], 3),
                      "s")
    units = {name: units_per_message(window, 10, due_after) for name, (window, due_after) in CASES.items()}
    base, late_base = units["no window"], units["no window, due at 10:00"]
    rows = [[name, f"{wu:.2f}", f"{wu - base:+.2f}", f"{wu - late_base:+.2f}"] for name, wu in units.items()]
    inside = units["always inside"] - base
    out.check("always inside its window: extra WU per message", round(inside, 3), "WU", budget="0",
              passed=abs(inside) < 1e-9)
    at_admission = units["deferred at admission (to 10:00)"] - late_base
    out.check("deferred at admission: WU over a message posted for the opening", round(at_admission, 3), "WU",
              budget="0", passed=abs(at_admission) < 1e-9)
    at_start = units["deferred at the start (window shut at 09:01)"] - late_base
    out.check("deferred at the start: WU over a message due at the next opening", round(at_start, 3), "WU")
    out.data["table"] = {
        "header": ["message", "WU per delivered message", "vs no window", "vs no window, due at the opening"],
        "rows": rows,
    }
    out.data["openings"] = runs
    out.notes.append(
        "Lateness: through the local runtime (sweep 1 s, lookahead 4 s), messages posted due 5 s ahead, the queue's "
        "window opening on the next whole minute at least 45 s ahead; each arrival at the loopback receiver minus the "
        "opening. The baseline posts the same messages all due at that instant to a queue without a window: the "
        "window makes a crowd due at one instant, and costs its lateness, no more. "
        "The rate-limited crowd is released by the pacing any due message gets (rate x W + max(1, rate) over "
        "every window), in due order. Write units: 10 messages delivered at the first attempt on a fixed clock, "
        "DynamoDB's rules (CapacityMeter). Deferred at admission: the due time is moved before the first write, so it "
        "costs what any message due that late costs (swept instead of handed off at ingest). Deferred at the start "
        "(the window closed while it waited): its begin write, one put-back write with the new due time, then the "
        "usual hand-off at the opening."
    )
    return out


def main() -> int:
    print(section().markdown())
    return 0
