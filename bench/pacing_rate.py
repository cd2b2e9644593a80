"""A queue's `rate_limit` at its contract maximum (10,000/s): the allocation side on a fixed clock (the pure rule of
`core.pacing`, and the `Pacer` with its pacing items against in-process moto, priced by DynamoDB's rules), and the
pacing items' peak write rates per item and on their partition, from the rule itself.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from hourglass.adapters.store import Store
from hourglass.core import pacing
from hourglass.core.delivery_control import MAX_RATE
from hourglass.core.pacing import Item, Rates, Slot, Start
from hourglass.core.timestamps import to_ms
from hourglass.service.pacing import Pacer
from moto import mock_aws

from bench import inprocess
from bench.inprocess import DUE_INDEX, T0
from bench.report import Section

RATE = MAX_RATE
PARTITION_WRU = 1_000  # DynamoDB, per partition
# The hand-off batches that allocate: an ingest request (100 messages) and a sweep chunk (service.sweep.SEND_CHUNK).
# Allocating processes in the contended case (each lost conditional write costs a unit and another round).
PROCESSES = 10
BATCHES = {"ingest requests of 100": 100, "sweep chunks of 500": 500}


@dataclass(frozen=True)
class Run:
    """One simulated stretch of hand-offs at RATE: `slots` allocated in `wall_s` of real time, every write of a
    pacing item (`writes`, by item), and the busiest item's and all items' writes in any one simulated second."""

    batch: int
    slots: int
    wall_s: float
    writes: int
    peak_item: int
    peak_total: int
    spacing_ok: bool

    @property
    def per_wall_second(self) -> float:
        return self.slots / self.wall_s if self.wall_s else float("inf")


def _hand_offs(batch: int, seconds: float, rate: float = RATE) -> list[tuple[int, list[int]]]:
    """(now ms, due ms of each start) of the batches that keep `rate` a second for `seconds`: each batch handed off
    as soon as the one before is due, its messages due 2 s after the hand-off (a backlog never builds)."""
    step_ms = batch / rate * 1000
    count = max(1, int(seconds * rate / batch))
    start = to_ms(T0)
    return [(start + int(i * step_ms), [start + int(i * step_ms) + 2000] * batch) for i in range(count)]


def _spaced(slots: Sequence[Slot], rate: float = RATE) -> bool:
    """Slots a spacing apart, as far as their milliseconds show: any window of 1 s holds no more slots than
    spacings fit in it and the millisecond a slot is rounded up by (the starts then keep `pacing.window_bound`)."""
    starts = sorted(slot.start_ms for slot in slots)
    most = (1_001_000 // pacing.pace(rate).spacing_us) + 1
    at = 0
    for i, first in enumerate(starts):
        while at < len(starts) and starts[at] <= first + 1000:
            at += 1
        if at - i > most:
            return False
    return True


def _tally(writes: list[tuple[int, Item]]) -> tuple[int, int]:
    """The busiest item's writes in one simulated second, and all items' writes in one second."""
    per_item: Counter[tuple[int, Item]] = Counter((now_ms // 1000, item) for now_ms, item in writes)
    per_second: Counter[int] = Counter(now_ms // 1000 for now_ms, _ in writes)
    return max(per_item.values(), default=0), max(per_second.values(), default=0)


def core_run(batch: int, seconds: float = 1.0, rate: float = RATE) -> Run:
    """The pure rule (`pacing.allocate_scoped`, an in-memory calendar) at `rate`: what it writes, and how fast it
    allocates."""
    calendar: dict[Item, tuple[int, ...]] = {}
    writes: list[tuple[int, Item]] = []
    slots: list[Slot] = []
    began = time.perf_counter()
    for now_ms, due in _hand_offs(batch, seconds, rate):
        allocation = pacing.allocate_scoped(Rates(rate), [Start(d) for d in due], now_ms, known=calendar.get)
        calendar.update(allocation.moved)
        writes += [(now_ms, item) for item in allocation.moved]
        slots += allocation.slots
    wall = time.perf_counter() - began
    return Run(batch, len(slots), wall, len(writes), *_tally(writes), _spaced(slots, rate))


@dataclass(frozen=True)
class Stored:
    run: Run
    units_per_slot: float  # write units of the pacing items per slot (conditional writes, DynamoDB's rules)


def stored_run(batch: int, seconds: float = 1.0, processes: int = 1) -> Stored:
    """The `Pacer` and its pacing items against in-process moto on a fixed clock, priced by `CapacityMeter`: the
    batches dealt in turn to `processes` allocators (a process's threads take turns per queue, so one `Pacer`
    stands for each), each of which learns of the others' slots from its lost writes."""
    with mock_aws():
        metered = inprocess.metered(projected=DUE_INDEX.projected)
        store = metered.ctx.store
        assert isinstance(store, Store)
        pacers = [Pacer(store) for _ in range(processes)]
        writes: list[tuple[int, Item]] = []
        _watch(store, writes, lambda: to_ms(metered.clock()))
        slots: list[Slot] = []
        began = time.perf_counter()
        for index, (now_ms, due) in enumerate(_hand_offs(batch, seconds)):
            metered.clock.now = T0 + timedelta(milliseconds=now_ms - to_ms(T0))
            slots += pacers[index % processes].slots("q", RATE, due, metered.clock.now)
        wall = time.perf_counter() - began
        _, uses = metered.meter.snapshot()
    units = uses["pacing"].write if "pacing" in uses else 0.0
    run = Run(batch, len(slots), wall, len(writes), *_tally(writes), _spaced(slots))
    return Stored(run, units / max(1, len(slots)))


def _watch(store: Store, writes: list[tuple[int, Item]], now_ms: Callable[[], int]) -> None:
    """Notes each pacing item write (won or lost), at the fixed clock's instant."""
    advance = store.advance_pace

    def noted(queue: str, item: Item, *args: object, **kwargs: object) -> tuple[bool, pacing.PaceState]:
        writes.append((now_ms(), item))
        return advance(queue, item, *args, **kwargs)  # type: ignore[arg-type]

    store.advance_pace = noted  # type: ignore[method-assign]


def section(*, quick: bool = False) -> Section:
    out = Section("pacing_rate", f"rate_limit {RATE:,.0f}/s (the contract's maximum): allocation and pacing items")
    seconds = 0.2 if quick else 1.0
    rows = []
    for name, batch in BATCHES.items():
        core = core_run(batch, seconds)
        stored = stored_run(batch, seconds)
        run = stored.run
        out.check(
            f"{name}: slots allocated per second of wall time, Pacer + pacing items (in-process moto)",
            round(run.per_wall_second),
            "slots/s",
            budget=f"≥ {RATE:,.0f}",
            passed=run.per_wall_second >= RATE,
        )
        out.check(f"{name}: the same, the pure rule (core.pacing)", round(core.per_wall_second), "slots/s")
        out.check(f"{name}: write units of pacing items per slot", round(stored.units_per_slot, 4), "WU")
        out.at_most(f"{name}: busiest pacing item, writes in one second", run.peak_item, "WU/s", PARTITION_WRU,
                    shown="1,000")  # fmt: skip
        out.at_most(f"{name}: every pacing item of the queue together, in one second", run.peak_total, "WU/s",
                    PARTITION_WRU, shown="1,000")  # fmt: skip
        out.check(f"{name}: slots within the contract's bound", "yes" if run.spacing_ok else "NO",
                  budget="yes", passed=run.spacing_ok)  # fmt: skip
        out.check(f"{name}: pure rule's writes = Pacer's", f"{core.writes} / {run.writes}", budget="equal",
                  passed=core.writes == run.writes)  # fmt: skip
        rows.append([name, "1", str(run.slots), f"{run.writes}", f"{run.peak_item}", f"{run.peak_total}"])
    # Many allocators at once (ingest Lambdas): each lost write costs a unit and a round; the slots stay spaced.
    contended = stored_run(100, seconds, processes=PROCESSES)
    run = contended.run
    name = f"ingest requests of 100 from {PROCESSES} processes in turn"
    out.check(f"{name}: write units of pacing items per slot (lost writes included)",
              round(contended.units_per_slot, 4), "WU")  # fmt: skip
    out.at_most(f"{name}: every pacing item of the queue together, in one second", run.peak_total, "WU/s",
                PARTITION_WRU, shown="1,000")  # fmt: skip
    out.check(f"{name}: slots within the contract's bound", "yes" if run.spacing_ok else "NO", budget="yes",
              passed=run.spacing_ok)  # fmt: skip
    rows.append(["ingest requests of 100", str(PROCESSES), str(run.slots), f"{run.writes}", f"{run.peak_item}",
                 f"{run.peak_total}"])  # fmt: skip
    out.data["table"] = {
        "header": ["hand-off", "allocators", "slots", "pacing writes", "busiest item, WU/s", "all pacing items, WU/s"],
        "rows": rows,
    }
    width = pacing.window_width(pacing.pace(RATE).spacing_us)
    out.notes.append(
        f"At {RATE:,.0f}/s slots are {pacing.pace(RATE).spacing_us} µs apart and a window (one pacing item) holds "
        f"{width // pacing.pace(RATE).spacing_us} of them ({width / 1000:g} ms): a batch writes each window its slots "
        "fall in once, so a window item is written by the one or two batches that reach it. Batches follow each "
        f"other on a fixed clock ({seconds:g} s of hand-offs, each batch due 2 s after it), one allocator (a "
        "process's threads take turns per queue); the pacing items share the queue's partition (`pk = queue`), "
        "whose message items are over its limit at this rate on their own (docs/capacity.md)."
    )
    return out


def main() -> int:
    print(section(quick="--quick" in sys.argv).markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
