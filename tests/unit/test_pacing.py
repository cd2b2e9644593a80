"""Rate-limit pacing: slot allocation, and the contract's window bound over batches, retries and re-paces."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from hourglass.core.pacing import (
    HANDOFF_LEAD_MS,
    MIN_TOLERANCE_US,
    Slot,
    allocate,
    dealt_again,
    pace,
    too_near,
    window_bound,
)
from hypothesis import given, settings
from hypothesis import strategies as st

NOW = 1_800_000_000_000
WINDOWS = (1.0, 1.001, 1.25, 1.5, 2.0, 3.3, 7.0, 10.0, 61.0)
RATES = st.sampled_from([0.1, 0.5, 1.0, 1.3, 4 / 3, 2.0, 7.0, 20.0, 333.0, 10_000.0]) | st.floats(0.1, 10_000)


def worst_window_excess(starts: list[int], rate: float) -> float:
    """max over windows starting at a start of (count - bound); <= 0 means the bound holds."""
    ordered = sorted(starts)
    worst = -float("inf")
    for index, first in enumerate(ordered):
        for width in WINDOWS:
            count = bisect_right(ordered, first + width * 1000) - index
            worst = max(worst, count - window_bound(rate, width))
    return worst


def test_fast_rates_space_slots_exactly_one_over_rate():
    assert pace(20).spacing_us == 50_000
    assert pace(20).tolerance_us == 950_000


def test_slow_rates_add_the_tolerance_to_the_spacing():
    assert pace(0.1) == pace(0.1).__class__(spacing_us=10_000_000 + MIN_TOLERANCE_US, tolerance_us=MIN_TOLERANCE_US)
    assert pace(1).spacing_us == 1_000_000 + MIN_TOLERANCE_US


@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("inf")])
def test_pace_rejects_rates_that_are_not_positive(rate):
    with pytest.raises(ValueError):
        pace(rate)


def test_a_burst_due_at_once_is_spread_one_slot_apart():
    due = NOW + 10_000
    result = allocate(None, 20, [due] * 5, NOW)
    assert [slot.start_ms for slot in result.slots] == [due, due + 50, due + 100, due + 150, due + 200]
    assert result.next_us == (due + 250) * 1000


def test_slots_follow_the_pacing_item_when_it_is_ahead():
    result = allocate((NOW + 60_000) * 1000, 10, [NOW + 5_000], NOW)
    assert result.slots == (Slot(start_ms=NOW + 60_000, latest_ms=NOW + 60_900),)


def test_a_slot_is_never_before_the_hand_off_lead():
    result = allocate(None, 10, [NOW - 30_000], NOW)
    assert result.slots[0].start_ms == NOW + HANDOFF_LEAD_MS


def test_slots_are_returned_in_the_given_order_but_allocated_in_due_order():
    result = allocate(None, 1000, [NOW + 5_003, NOW + 5_000, NOW + 5_000], NOW)
    assert [slot.start_ms for slot in result.slots] == [NOW + 5_003, NOW + 5_000, NOW + 5_001]


def test_an_empty_batch_leaves_the_pacing_item_unchanged():
    assert allocate(123, 5, [], NOW).next_us == 123


def test_a_slot_may_start_only_inside_its_window():
    slot = Slot(start_ms=100, latest_ms=350)
    assert [slot.may_start(t) for t in (99, 100, 350, 351)] == [False, True, True, False]
    assert slot.missed(351) and not slot.missed(350)


@given(rate=RATES, offsets=st.lists(st.integers(-5_000, 30_000), min_size=1, max_size=40))
def test_no_slot_is_before_its_due_time_and_due_order_is_kept(rate, offsets):
    due = [NOW + offset for offset in offsets]
    slots = allocate(None, rate, due, NOW).slots
    assert all(slot.start_ms >= d for slot, d in zip(slots, due, strict=True))
    by_due = [slot.start_ms for _, slot in sorted(zip(due, slots, strict=True), key=lambda pair: pair[0])]
    assert by_due == sorted(by_due)


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_window_bound_holds_over_batches_retries_and_repaces(rate, data):
    """Several allocators (sweepers, dispatchers' retries, re-paces) share one pacing item; starts
    land anywhere in their slot's window; the contract's bound holds over every window."""
    state: int | None = None
    now = NOW
    waiting: list[int] = []
    starts: list[int] = []
    for _ in range(data.draw(st.integers(1, 8), label="batches")):
        now += data.draw(st.integers(0, 20_000), label="advance")
        fresh = data.draw(st.lists(st.integers(-3_000, 20_000), max_size=25), label="due offsets")
        due = [now + offset for offset in fresh] + waiting
        waiting = []
        result = allocate(state, rate, due, now)
        state = result.next_us
        for slot, due_ms in zip(result.slots, due, strict=True):
            fate = data.draw(st.sampled_from(["start", "start", "start", "miss", "retry"]), label="fate")
            if fate == "miss":
                waiting.append(due_ms)  # started too late: takes a new slot, keeps its due time
                continue
            started = data.draw(st.integers(slot.start_ms, slot.latest_ms), label="start")
            starts.append(started)
            if fate == "retry":
                waiting.append(started + data.draw(st.integers(0, 5_000), label="backoff"))
    assert worst_window_excess(starts, rate) <= 1e-9


@pytest.mark.parametrize("rate", [0.1, 0.7, 1.0, 1.2, 2.0, 20.0, 10_000.0])
def test_window_bound_holds_when_every_other_attempt_starts_as_late_as_allowed(rate):
    slots = allocate(None, rate, [NOW + 2_000] * 400, NOW).slots
    starts = [slot.latest_ms if index % 2 == 0 else slot.start_ms for index, slot in enumerate(slots)]
    assert worst_window_excess(starts, rate) <= 1e-9


def test_a_burst_of_300_at_rate_20_takes_fifteen_seconds():
    slots = allocate(None, 20, [NOW + 2_000] * 300, NOW).slots
    assert slots[-1].start_ms - slots[0].start_ms == 299 * 50


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_a_batch_sent_after_some_of_its_slots_keeps_due_order_and_the_bound(rate, data):
    """Slots taken before a slow claim: at the send, the ones too near go to the batch's later messages, and new
    ones from the end of the line to its last; every timer can still reach its slot, none moves earlier."""
    offsets = data.draw(st.lists(st.integers(-5_000, 30_000), min_size=1, max_size=40), label="due offsets")
    due = sorted(NOW + offset for offset in offsets)  # claims go in due order (slots in whole ms may tie)
    first = allocate(None, rate, due, NOW)
    sent = NOW + data.draw(st.integers(0, 40_000), label="claim time")
    late = [d for d, slot in zip(due, first.slots, strict=True) if too_near(slot, sent)]
    fresh = allocate(first.next_us, rate, late, sent).slots
    dealt = dealt_again(first.slots, fresh)
    assert all(new.start_ms >= old.start_ms for new, old in zip(dealt, first.slots, strict=True))
    assert not any(too_near(slot, sent) for slot in dealt)
    by_due = [slot.start_ms for _, slot in sorted(zip(due, dealt, strict=True), key=lambda pair: pair[0])]
    assert by_due == sorted(by_due)
    starts = [data.draw(st.integers(slot.start_ms, slot.latest_ms), label="start") for slot in dealt]
    assert worst_window_excess(starts, rate) <= 1e-9
