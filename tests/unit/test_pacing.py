"""Rate-limit pacing: slot allocation, and the contract's window bound over batches, retries and re-paces."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from hourglass.core.pacing import (
    HANDOFF_LEAD_MS,
    MIN_TOLERANCE_US,
    Item,
    Slot,
    Window,
    allocate,
    by_cell,
    dealt_again,
    free_offset,
    item_at,
    pace,
    too_near,
    window_bound,
    window_width,
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
    slots = allocate({}, 20, [due] * 5, NOW)
    assert [slot.start_ms for slot in slots] == [due, due + 50, due + 100, due + 150, due + 200]


def test_a_start_in_a_full_window_takes_the_next_window_with_room():
    calendar: dict[Item, tuple[int, ...]] = {}
    allocate(calendar, 10, [NOW + 5_000] * 10, NOW)  # window 5..6 s full at 10 a second
    (slot,) = allocate(calendar, 10, [NOW + 5_000], NOW)
    assert slot == Slot(start_ms=NOW + 6_000, latest_ms=NOW + 6_900)


def test_a_start_handed_off_earlier_but_due_later_does_not_hold_back_one_due_sooner():
    """The issue's pair: `delay` 40, then `delay` 3, on a queue at 20 a second: the second starts on time."""
    calendar: dict[Item, tuple[int, ...]] = {}
    allocate(calendar, 20, [NOW + 40_000], NOW)
    (slot,) = allocate(calendar, 20, [NOW + 3_000], NOW)
    assert slot.start_ms == NOW + 3_000


def test_a_start_due_now_is_not_held_back_by_a_backlog_handed_off_for_later():
    """deliver-now on a rate-limited queue whose near future is free: it takes the first slot after the lead."""
    calendar: dict[Item, tuple[int, ...]] = {}
    allocate(calendar, 5, [NOW + 60_000 + i for i in range(500)], NOW)
    (slot,) = allocate(calendar, 5, [NOW], NOW)
    assert slot.start_ms == NOW + HANDOFF_LEAD_MS


def test_a_slot_is_never_before_the_hand_off_lead():
    slots = allocate({}, 10, [NOW - 30_000], NOW)
    assert slots[0].start_ms == NOW + HANDOFF_LEAD_MS


def test_slots_are_returned_in_the_given_order_but_allocated_in_due_order():
    slots = allocate({}, 1000, [NOW + 5_003, NOW + 5_000, NOW + 5_000], NOW)
    assert [slot.start_ms for slot in slots] == [NOW + 5_003, NOW + 5_000, NOW + 5_001]


def test_an_empty_batch_leaves_the_calendar_unchanged():
    calendar: dict[Item, tuple[int, ...]] = {}
    assert allocate(calendar, 5, [], NOW) == () and calendar == {}


def test_a_slot_may_start_only_inside_its_window():
    slot = Slot(start_ms=100, latest_ms=350)
    assert [slot.may_start(t) for t in (99, 100, 350, 351)] == [False, True, True, False]
    assert slot.missed(351) and not slot.missed(350)


@given(rate=RATES, offsets=st.lists(st.integers(-5_000, 30_000), min_size=1, max_size=40))
def test_no_slot_is_before_its_due_time_and_due_order_is_kept(rate, offsets):
    due = [NOW + offset for offset in offsets]
    slots = allocate({}, rate, due, NOW)
    assert all(slot.start_ms >= d for slot, d in zip(slots, due, strict=True))
    by_due = [slot.start_ms for _, slot in sorted(zip(due, slots, strict=True), key=lambda pair: pair[0])]
    assert by_due == sorted(by_due)


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_window_bound_holds_over_batches_retries_and_repaces(rate, data):
    """Several allocators (sweepers, dispatchers' retries, re-paces) share one pacing item; starts
    land anywhere in their slot's window; the contract's bound holds over every window."""
    calendar: dict[Item, tuple[int, ...]] = {}
    now = NOW
    waiting: list[int] = []
    starts: list[int] = []
    for _ in range(data.draw(st.integers(1, 8), label="batches")):
        now += data.draw(st.integers(0, 20_000), label="advance")
        fresh = data.draw(st.lists(st.integers(-3_000, 20_000), max_size=25), label="due offsets")
        due = [now + offset for offset in fresh] + waiting
        waiting = []
        for slot, due_ms in zip(allocate(calendar, rate, due, now), due, strict=True):
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
    slots = allocate({}, rate, [NOW + 2_000] * 400, NOW)
    starts = [slot.latest_ms if index % 2 == 0 else slot.start_ms for index, slot in enumerate(slots)]
    assert worst_window_excess(starts, rate) <= 1e-9


def test_a_burst_of_300_at_rate_20_takes_fifteen_seconds():
    slots = allocate({}, 20, [NOW + 2_000] * 300, NOW)
    assert slots[-1].start_ms - slots[0].start_ms == 299 * 50


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_a_batch_sent_after_some_of_its_slots_keeps_due_order_and_the_bound(rate, data):
    """Slots taken before a slow claim: at the send, the ones too near go to the batch's later messages, and new
    ones from the end of the line to its last; every timer can still reach its slot, none moves earlier."""
    offsets = data.draw(st.lists(st.integers(-5_000, 30_000), min_size=1, max_size=40), label="due offsets")
    due = sorted(NOW + offset for offset in offsets)  # claims go in due order (slots in whole ms may tie)
    calendar: dict[Item, tuple[int, ...]] = {}
    first = allocate(calendar, rate, due, NOW)
    sent = NOW + data.draw(st.integers(0, 40_000), label="claim time")
    late = [d for d, slot in zip(due, first, strict=True) if too_near(slot, sent)]
    fresh = allocate(calendar, rate, late, sent)
    dealt = dealt_again(first, fresh)
    assert all(new.start_ms >= old.start_ms for new, old in zip(dealt, first, strict=True))
    assert not any(too_near(slot, sent) for slot in dealt)
    by_due = [slot.start_ms for _, slot in sorted(zip(due, dealt, strict=True), key=lambda pair: pair[0])]
    assert by_due == sorted(by_due)
    starts = [data.draw(st.integers(slot.start_ms, slot.latest_ms), label="start") for slot in dealt]
    assert worst_window_excess(starts, rate) <= 1e-9


def _no_room(calendar: dict[Item, tuple[int, ...]], item: Item, spacing_us: int, due_us: int) -> bool:
    """Whether a window had no slot left at or after `due_us`."""
    base = item.window.index * item.window.width_us
    cells = item.window.width_us // spacing_us
    following = by_cell(
        calendar.get(Item(item.scope, Window(item.window.width_us, item.window.index + 1)), ()), spacing_us
    )
    taken = by_cell(calendar.get(item, ()), spacing_us)
    return free_offset(taken, spacing_us, cells, max(0, due_us - base), following.get(0)) is None


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_a_start_is_held_back_past_its_own_window_only_by_full_windows_in_any_hand_off_order(rate, data):
    """One message per hand-off, in any order, due anywhere: each starts at or after its due time, at the first free
    instant of the calendar: past its own window only through windows with no room left from its due time on."""
    offsets = data.draw(st.lists(st.integers(1_000, 60_000), min_size=1, max_size=60), label="due offsets")
    order = data.draw(st.permutations(range(len(offsets))), label="hand-off order")
    spacing = pace(rate).spacing_us
    calendar: dict[Item, tuple[int, ...]] = {}
    starts = []
    for index in order:
        due = NOW + offsets[index]
        before = dict(calendar)
        (slot,) = allocate(calendar, rate, [due], NOW)
        first, last = item_at(None, rate, due * 1000), item_at(None, rate, slot.start_ms * 1000 - 999)
        assert slot.start_ms >= due
        passed = [Item(None, Window(first.window.width_us, k)) for k in range(first.window.index, last.window.index)]
        assert all(_no_room(before, item, spacing, due * 1000) for item in passed)
        starts.append(slot.start_ms)
    assert worst_window_excess(starts, rate) <= 1e-9


@settings(max_examples=150, deadline=None)
@given(rate=RATES, data=st.data())
def test_below_the_limit_every_start_is_at_its_due_time_in_any_hand_off_order(rate, data):
    """Due times a spacing apart or more (no limit binds), handed off one by one in any order: each starts at its
    due time, whatever was handed off before it (the issue's defect: a cursor made such starts late)."""
    spacing = pace(rate).spacing_us
    gaps = data.draw(st.lists(st.integers(spacing + 1000, 3 * window_width(spacing)), min_size=1, max_size=40))
    due = [NOW + 2_000 + sum(gaps[: i + 1]) // 1000 for i in range(len(gaps))]
    order = data.draw(st.permutations(range(len(due))), label="hand-off order")
    calendar: dict[Item, tuple[int, ...]] = {}
    late = [allocate(calendar, rate, [due[i]], NOW)[0].start_ms - due[i] for i in order]
    assert late == [0] * len(due)
