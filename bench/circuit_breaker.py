"""The circuit breaker's cost per attempt in read and write units (DynamoDB's rules, `CapacityMeter`), in process:
attempts on a queue without a breaker and with one (succeeding, failing), and the one attempt that trips it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hourglass.adapters.http_target import HttpReply
from hourglass.core import delivery_control
from hourglass.core.timestamps import format_rfc3339, from_ms, to_ms
from hourglass.service.messages import Messages
from moto import mock_aws

from bench import inprocess
from bench.capacity_units import Units
from bench.inprocess import T0, ok
from bench.report import Section

URL = "http://127.0.0.1:9/x"
WINDOW = 300
# Never trips (a failure still reads the window); trips at the last of `count` failing attempts.
WATCHING = {"failure_ratio": 1.0, "min_attempts": 100_000, "window": WINDOW}
USE, SETTINGS = "circuit breaker", "queue settings"  # CapacityMeter's names of the shared uses


def _failing(*_: Any, **__: Any) -> HttpReply:
    return HttpReply(status=500, headers={}, body=b"")


def run(breaker: dict[str, Any] | None, post: Callable[..., HttpReply], count: int) -> tuple[dict[str, Units], bool]:
    """Units by shared use of `count` single-attempt messages due spread over the breaker's window (so that a
    decision sums every bucket), from their create on, and whether the queue ended paused."""
    with mock_aws():
        metered = inprocess.metered(post=post)
        meter = metered.meter
        messages = Messages(metered.ctx)
        settings: dict[str, Any] = {"target": {"type": "http", "url": URL}, "retry": {"max_attempts": 1}}
        if breaker is not None:
            settings["circuit_breaker"] = breaker
        messages.queues.put("q", settings)
        _, at_creation = meter.snapshot()  # a new queue's clearing of a former one's counters: not per attempt
        first = to_ms(T0 + timedelta(seconds=3))
        step = WINDOW * 1000 // count
        batch = [{"body": i, "deliver_at": format_rfc3339(from_ms(first + i * step))} for i in range(count)]
        messages.create("q", {"messages": batch})
        metered.drain()
        assert not meter.errors, meter.errors
        paused = delivery_control.of(messages.queues.get("q")).paused
        _, uses = meter.snapshot()
    spent = {}
    for name, units in uses.items():
        before = at_creation.get(name, Units())
        spent[name] = Units(units.write - before.write, units.read - before.read, units.requests - before.requests)
    return spent, paused


def section(*, quick: bool = False) -> Section:
    out = Section("circuit_breaker", "Circuit breaker: read and write units per attempt, and of a trip")
    count = 10 if quick else 40
    trips = {"failure_ratio": 0.5, "min_attempts": count, "window": WINDOW}
    cases = {
        "no breaker": (None, ok),
        "breaker, delivered": (WATCHING, ok),
        "breaker, failed (no trip)": (WATCHING, _failing),
        "breaker, failed, the last attempt trips": (trips, _failing),
    }
    measured = {name: run(breaker, post, count) for name, (breaker, post) in cases.items()}
    rows, per = [], {}
    for name, (uses, _) in measured.items():
        own = uses.get(USE, Units())
        per[name] = (own.write / count, own.read / count)
        rows.append([name, f"{per[name][0]:.2f}", f"{per[name][1]:.2f}", str(own.requests)])
    none, success, failure = per["no breaker"], per["breaker, delivered"], per["breaker, failed (no trip)"]
    out.check(
        "no breaker: WU / RU per attempt", f"{none[0]:.2f} / {none[1]:.2f}", budget="0 / 0", passed=none == (0.0, 0.0)
    )
    out.check(
        "breaker, delivered: WU / RU per attempt",
        f"{success[0]:.2f} / {success[1]:.2f}",
        budget="1 / 0",
        passed=success == (1.0, 0.0),
    )
    out.check(
        "breaker, failed: WU / RU per attempt (the window read)",
        f"{failure[0]:.2f} / {failure[1]:.2f}",
        budget="1 / <= 1",
        passed=failure[0] == 1.0 and failure[1] <= 1.0,
    )
    tripped_uses, tripped = measured["breaker, failed, the last attempt trips"]
    watching_uses, _ = measured["breaker, failed (no trip)"]
    trip_write = tripped_uses[SETTINGS].write - watching_uses[SETTINGS].write
    out.check(
        "the trip: WU of the queue item's conditional pause",
        f"{trip_write:g}",
        "WU",
        budget="1",
        passed=trip_write == 1,
    )
    out.check("the queue paused itself", "yes" if tripped else "no", budget="yes", passed=tripped)
    out.data["table"] = {"header": ["attempts", "breaker WU per attempt", "breaker RU per attempt", "requests"],
                         "rows": rows}  # fmt: skip
    out.data["per_attempt"] = {"none": none, "success": success, "failure": failure, "trip_write": trip_write}
    out.notes.append(
        f"{count} messages of one attempt each (max_attempts 1) due spread over the breaker's {WINDOW} s window, so "
        "each decision sums all its buckets; a fixed clock; the breaker's own items and Query priced by DynamoDB's "
        "rules (CapacityMeter). Each attempt on a queue with a breaker ADDs one to its time bucket (one small item per "
        "queue, resume and bucket: 1 WU); a failure also reads the window (one strongly consistent Query of at most "
        "11 small items: 1 RU), however many dispatchers share the queue. A queue without a breaker pays nothing. "
        "Only a failure can trip it: one conditional update of the queue item (1 WU; with a failure destination, a "
        "transaction with the notice it owes: 2 WU per item, 4 WU once per trip). Not per attempt: a queue's PUT "
        "that starts a new lifetime clears a former one's counters (one Query, 1 RU, and a delete per item found)."
    )
    return out


def main() -> int:
    print(section().markdown())
    return 0
