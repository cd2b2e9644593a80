"""service.dispatch.start_gate.QueueReads: one read of a queue at a time, shared by the starts that need it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from hourglass.service.context import Context
from hourglass.service.dispatch.start_gate import QUEUE_MAX_AGE, QueueReads

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class SlowQueues:
    """A queue item whose reads wait until the test opens the gate; each read returns a new answer."""

    def __init__(self, clock: list[datetime], took: timedelta = timedelta(0)) -> None:
        self.clock = clock
        self.took = took
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.reads = 0

    def get_queue(self, name: str, *, consistent: bool = False) -> Any:
        self.reads += 1
        answer = f"{name} read {self.reads}"
        self.entered.set()
        assert self.gate.wait(5)
        self.clock[0] += self.took
        return answer


class Clock:
    """The fixed clock, counting who asked it (every get asks it first)."""

    def __init__(self, clock: list[datetime]) -> None:
        self.clock = clock
        self.asked = threading.Semaphore(0)

    def __call__(self) -> datetime:
        self.asked.release()
        return self.clock[0]


def reads_of(store: SlowQueues, clock: list[datetime]) -> QueueReads:
    return QueueReads(cast(Context, SimpleNamespace(store=store, clock=Clock(clock))))


def all_at_once(reads: QueueReads, store: SlowQueues, callers: int) -> list[Any]:
    """One get takes the read and blocks in it; `callers` more ask meanwhile; then the read comes back."""
    got: list[Any] = [None] * (callers + 1)

    def call(index: int) -> None:
        got[index] = reads.get("q")

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    assert store.entered.wait(5)
    asked = cast(Clock, reads.ctx.clock).asked
    threads += [threading.Thread(target=call, args=(i,)) for i in range(1, callers + 1)]
    for thread in threads[1:]:
        thread.start()
    for _ in range(callers + 1):  # the first get's question and each caller's: all are under way
        assert asked.acquire(timeout=5)
    store.gate.set()
    for thread in threads:
        thread.join(5)
    return got


def test_starts_that_need_the_queue_while_it_is_read_share_that_read() -> None:
    clock = [NOW]
    store = SlowQueues(clock)
    got = all_at_once(reads_of(store, clock), store, callers=8)
    assert store.reads == 1 and got == ["q read 1"] * 9


def test_a_read_too_old_by_the_time_it_came_back_is_read_again_by_those_that_waited() -> None:
    clock = [NOW]
    store = SlowQueues(clock, took=QUEUE_MAX_AGE + timedelta(milliseconds=1))
    got = all_at_once(reads_of(store, clock), store, callers=1)
    assert store.reads == 2 and sorted(got) == ["q read 1", "q read 2"]


def test_a_read_under_way_when_the_batch_starts_is_not_kept_for_it() -> None:
    clock = [NOW]
    store = SlowQueues(clock)
    reads = reads_of(store, clock)
    first = threading.Thread(target=reads.get, args=("q",))
    first.start()
    assert store.entered.wait(5)
    reads.clear()
    store.gate.set()
    first.join(5)
    assert reads.get("q") == "q read 2"
