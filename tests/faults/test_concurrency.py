"""Several sweepers and dispatchers at once on one table: each message is delivered once per due time (and
claimed once, on a queue whose hand-offs are claimed)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from hourglass.service.dispatch import Dispatcher
from hourglass.service.sweep import Sweeper

from tests.faults.proxies import timer_ids
from tests.integration.conftest import Harness
from tests.integration.test_flow import CLAIMED_QUEUE, make_queue, post

SWEEPERS = 4
DISPATCHERS = 4
MESSAGES = 100


def together(workers: int, job: Callable[[int], Any]) -> list[Any]:
    """Starts `workers` jobs at the same instant."""
    start = threading.Barrier(workers)

    def run(index: int) -> Any:
        start.wait()
        return job(index)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, range(workers)))


def scheduled(h: Harness, settings: dict[str, Any] | None = None) -> list[str]:
    make_queue(h, settings=settings)
    ids: list[str] = []
    for start in range(0, MESSAGES, 100):
        batch = [{"body": i, "delay": 400 + i % 120} for i in range(start, min(MESSAGES, start + 100))]
        ids += [m["id"] for m in post(h, *batch)]
    h.clock.advance(300)
    return ids


def test_concurrent_sweepers_claim_each_message_once(harness: Harness) -> None:
    ids = scheduled(harness, CLAIMED_QUEUE)
    reports = together(SWEEPERS, lambda _: [Sweeper(harness.ctx).run() for _ in range(2)])
    timers = Counter(timer_ids(harness.timers()))
    assert sum(r.handed_off for runs in reports for r in runs) == MESSAGES
    assert timers == Counter({i: 1 for i in ids})


def test_concurrent_sweepers_of_an_unclaimed_queue_send_at_most_one_timer_each(harness: Harness) -> None:
    """Unclaimed, each sweep that reads a message sends its timer: duplicates the start's condition absorbs."""
    ids = scheduled(harness)
    together(SWEEPERS, lambda _: [Sweeper(harness.ctx).run() for _ in range(2)])
    timers = Counter(timer_ids(harness.timers()))
    assert set(timers) == set(ids)
    assert max(timers.values()) <= SWEEPERS


def test_concurrent_dispatchers_with_duplicate_timers_deliver_each_message_once(harness: Harness) -> None:
    ids = scheduled(harness)
    together(SWEEPERS, lambda _: Sweeper(harness.ctx).run())
    timers = harness.timers()
    harness.clock.advance(400)  # everything is due: no dispatcher waits
    # SQS delivers at least once: every timer reaches two dispatchers
    records = [(t["record"], t["body"]) for t in timers] * 2
    chunks = [records[i::DISPATCHERS] for i in range(DISPATCHERS)]

    def dispatch(index: int) -> None:
        for start in range(0, len(chunks[index]), 10):
            Dispatcher(harness.ctx).run_batch(chunks[index][start : start + 10])

    together(DISPATCHERS, dispatch)
    delivered = Counter(r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests)
    statuses = Counter(harness.ctx.store.get_message("orders", i).status.value for i in ids)
    assert delivered == Counter({i: 1 for i in ids})
    assert statuses == Counter({"delivered": MESSAGES})


def test_sweeps_racing_ingest_lose_nothing(harness: Harness) -> None:
    make_queue(harness)
    ids: list[str] = []

    def work(index: int) -> None:
        if index == 0:
            for i in range(25):
                ids.extend(m["id"] for m in post(harness, *({"body": i, "delay": d} for d in (0, 200, 320, 500))))
        else:
            for _ in range(6):
                Sweeper(harness.ctx).run()

    together(4, work)
    for _ in range(6):
        harness.clock.advance(timedelta(minutes=2).total_seconds())
        harness.sweep()
        harness.dispatch(harness.timers())
    delivered = Counter(r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests)
    assert delivered == Counter({i: 1 for i in ids})
