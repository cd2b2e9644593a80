"""Pacing per flow key (v1.2): the queue's and each key's rate kept at once by one allocation rule, by several
concurrent pacers sharing the pacing items, with starts anywhere in their windows; and priority among the held."""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.pacing import Rates, Start, allocate_scoped, pace
from hourglass.service.pacing import Pacer
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.pacing_items import PacingItems
from tests.unit.test_pacing import NOW, RATES, worst_window_excess

NOW_DT = datetime.fromtimestamp(NOW / 1000, UTC)
KEYS = st.sampled_from(["a", "b", "c", None])


def by_scope(starts: list[Start], chosen: list[int]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for start, at in zip(starts, chosen, strict=True):
        out[start.scope].append(at)
    return out


@settings(max_examples=60, deadline=None)
@given(queue_rate=RATES | st.none(), key_rate=RATES, data=st.data())
def test_every_bound_holds_with_concurrent_pacers(queue_rate, key_rate, data):
    """Four pacers (sweepers, ingest, dispatchers) allocate batches of keyed starts at once from the same
    items; each attempt starts anywhere in its slot. The queue's bound and every key's hold."""
    check_concurrent_pacers(queue_rate, key_rate, data)


@settings(max_examples=60, deadline=None)
@given(queue_rate=RATES, key_rate=RATES, data=st.data())
def test_both_bounds_hold_with_queue_windows_and_concurrent_pacers(queue_rate, key_rate, data):
    """The same with both a queue rate and a key rate, always: the slots come from the windows' items, which the
    pacers change concurrently, in any order (a key held far ahead writes a far window first)."""
    check_concurrent_pacers(queue_rate, key_rate, data)


def check_concurrent_pacers(queue_rate, key_rate, data):
    rates = Rates(queue_rate, key_rate)
    items = PacingItems()
    batches = [
        [
            Start(NOW + offset, key, priority)
            for offset, key, priority in data.draw(
                st.lists(st.tuples(st.integers(-2_000, 15_000), KEYS, st.integers(0, 9)), min_size=1, max_size=15),
                label=f"batch {i}",
            )
        ]
        for i in range(data.draw(st.integers(2, 6), label="batches"))
    ]
    lateness = data.draw(st.lists(st.floats(0, 1), min_size=100, max_size=100), label="lateness")
    results: list[tuple[list[Start], tuple]] = []
    lock = threading.Lock()

    def run(batch: list[Start]) -> None:
        slots = Pacer(items).scoped_slots("q", rates, batch, NOW_DT, lead_ms=0)
        with lock:
            results.append((batch, slots))

    threads = [threading.Thread(target=run, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every: list[Start] = []
    chosen: list[int] = []
    for batch, slots in results:
        for start, slot in zip(batch, slots, strict=True):
            assert slot.start_ms >= start.due_ms  # never early
            late = lateness[len(chosen) % len(lateness)]
            chosen.append(slot.start_ms + int(late * (slot.latest_ms - slot.start_ms)))
            every.append(start)
    if queue_rate is not None:
        assert worst_window_excess(chosen, queue_rate) <= 1e-9
    for scope_starts in by_scope(every, chosen).values():
        assert worst_window_excess(scope_starts, key_rate) <= 1e-9


def test_a_saturated_key_does_not_delay_another_key():
    """Key "a" has 100 due at once at 2 a second; key "b"'s one message starts at its due time."""
    starts = [Start(NOW, "a")] * 100 + [Start(NOW + 5_000, "b")]
    allocation = allocate_scoped(Rates(None, 2.0), starts, NOW, known=lambda item: None, lead_ms=0)
    assert allocation.slots[-1].start_ms == NOW + 5_000


def test_a_key_held_far_ahead_leaves_the_near_queue_slots_to_another_key():
    """Queue rate 10 and key rate 2: key "a"'s 40 due at once reach 20 s ahead; key "b"'s message, allocated
    after them from the same items, still starts within a window (1 s) of its due time."""
    pacer, rates = Pacer(PacingItems()), Rates(10.0, 2.0)
    pacer.scoped_slots("q", rates, [Start(NOW, "a")] * 40, NOW_DT, lead_ms=0)
    (slot,) = pacer.scoped_slots("q", rates, [Start(NOW + 3_000, "b")], NOW_DT, lead_ms=0)
    assert NOW + 3_000 <= slot.start_ms <= NOW + 4_000


def test_a_process_new_to_a_backlogged_queue_finds_the_first_free_window_in_a_few_tries():
    """Another process filled the queue's windows for 150 s (rate 10, key rate 10); a new one allocates a start
    due now after the backlog, and learns where it ends from a read of the windows, not one lost write each."""
    items, rates = PacingItems(), Rates(10.0, 10.0)
    keys = [Start(NOW, f"k{i}") for i in range(1_500)]
    Pacer(items).scoped_slots("q", rates, keys, NOW_DT, lead_ms=0)
    items.tries = 0
    (slot,) = Pacer(items).scoped_slots("q", rates, [Start(NOW, "late")], NOW_DT, lead_ms=0)
    assert slot.start_ms >= NOW + 150_000 and items.tries <= 6


def test_held_back_starts_go_by_priority_then_due():
    starts = [Start(NOW, "k", 1), Start(NOW + 1, "k", 1), Start(NOW + 2, "k", 9), Start(NOW + 3, "k", 9)]
    allocation = allocate_scoped(Rates(None, 1.0), starts, NOW, known=lambda item: None, lead_ms=0)
    order = sorted(range(4), key=lambda i: allocation.slots[i].start_ms)
    assert order == [0, 2, 3, 1]


def test_priority_never_makes_a_start_early():
    """The low one is due now, the high one later: the low one goes first, the high one at its due time."""
    starts = [Start(NOW, "k", 0), Start(NOW + 10_000, "k", 9)]
    allocation = allocate_scoped(Rates(1.0, 1.0), starts, NOW, known=lambda item: None, lead_ms=0)
    assert [slot.start_ms for slot in allocation.slots] == [NOW, NOW + 10_000]


def test_only_the_windows_of_the_keys_of_the_batch_move():
    allocation = allocate_scoped(
        Rates(None, 2.0), [Start(NOW, "a"), Start(NOW)], NOW, known=lambda item: None, lead_ms=0
    )
    assert {item.scope for item in allocation.moved} == {"a", ""}


@pytest.mark.parametrize("rates", [Rates(3.0, 2.0), Rates(None, 2.0), Rates(1.0, 5.0)])
def test_a_slot_is_inside_the_window_of_every_scope(rates):
    allocation = allocate_scoped(rates, [Start(NOW, "a")] * 50, NOW, known=lambda item: None, lead_ms=0)
    tightest = min(pace(rate).tolerance_us // 1000 for rate in (rates.queue, rates.key) if rate is not None)
    assert max(slot.latest_ms - slot.start_ms for slot in allocation.slots) <= tightest


def test_the_two_keys_of_the_issue_finish_together():
    """Two keys at key_rate_limit 2, 20 due at once each: both end within one spacing of each other."""
    starts = [Start(NOW, "a")] * 20 + [Start(NOW, "b")] * 20
    slots = allocate_scoped(Rates(None, 2.0), starts, NOW, known=lambda item: None, lead_ms=0).slots
    last_a, last_b = slots[19].start_ms, slots[39].start_ms
    assert abs(last_a - last_b) <= int(timedelta(seconds=0.5).total_seconds() * 1000)
