"""Priority across hand-offs (`pacing.give_way`): a start handed off after a backlog of lower priorities of its
scope takes one of their slots, and the victim the start's fresh one. Every scope keeps its set of slots."""

from __future__ import annotations

from collections import Counter, defaultdict

from hourglass.core.pacing import (
    Held,
    Item,
    Rates,
    Slot,
    Start,
    allocate_scoped,
    give_way,
)
from hourglass.service.pacing import HeldSlots
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_pacing import NOW, worst_window_excess

SLOW_RATES = st.sampled_from([0.5, 1.0, 2.0, 4 / 3, 7.0])
KEYS = st.sampled_from(["a", "b", None])


class Line:
    """One process allocating batches in turn from its pacing items (the windows of the queue and of each key)."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        self.calendar: dict[Item, tuple[int, ...]] = {}

    def allocate(self, starts: list[Start], now_ms: int) -> tuple[Slot, ...]:
        got = allocate_scoped(self.rates, starts, now_ms, lead_ms=0, known=self.calendar.get)
        self.calendar.update(got.moved)
        return got.slots


def held_of(starts: list[Start], slots: tuple[Slot, ...], first_id: int, keyed: bool) -> list[Held]:
    return [
        Held(slot, start.scope if keyed else "", start.priority, f"m{first_id + i}", 1)
        for i, (start, slot) in enumerate(zip(starts, slots, strict=True))
    ]


def test_three_high_take_the_first_slots_beyond_the_margin_of_ten_low():
    """Rate 1 (slots 1.25 s apart): ten low due now hold now .. now+11.25 s; three high handed off next take the
    first three of those at least the margin (4 s) ahead: now+5, 6.25 and 7.5 s."""
    line = Line(Rates(1.0))
    low = [Start(NOW, None, 1)] * 10
    held = held_of(low, line.allocate(low, NOW), 0, keyed=False)
    high = [Start(NOW, None, 9)] * 3
    fresh = line.allocate(high, NOW)
    ways = give_way(held, high, fresh, NOW, keyed=False)
    assert [(way.index, way.victim.slot.start_ms - NOW) for way in ways] == [(0, 5000), (1, 6250), (2, 7500)]


def test_the_same_priority_never_gives_way():
    line = Line(Rates(1.0))
    first = [Start(NOW)] * 10
    held = held_of(first, line.allocate(first, NOW), 0, keyed=False)
    later = [Start(NOW)] * 3
    assert give_way(held, later, line.allocate(later, NOW), NOW, keyed=False) == []


def test_a_slot_before_the_start_is_due_is_not_taken():
    line = Line(Rates(1.0))
    low = [Start(NOW, None, 0)] * 10
    held = held_of(low, line.allocate(low, NOW), 0, keyed=False)
    high = [Start(NOW + 7_000, None, 9)]
    (way,) = give_way(held, high, line.allocate(high, NOW), NOW, keyed=False)
    assert way.victim.slot.start_ms == NOW + 7_500


def test_another_keys_slot_is_not_taken():
    line = Line(Rates(None, 1.0))
    low = [Start(NOW, "a", 0)] * 10
    held = held_of(low, line.allocate(low, NOW), 0, keyed=True)
    high = [Start(NOW, "b", 9)] * 10 + [Start(NOW, "a", 9)]
    ways = give_way(held, high, line.allocate(high, NOW), NOW, keyed=True)
    assert [(way.index, way.victim.slot.start_ms - NOW) for way in ways] == [(10, 5_000)]


def test_a_noted_slot_is_chosen_once():
    held = HeldSlots()
    low = Held(Slot(NOW + 5_000, NOW + 5_250), "", 1, "low", 1)
    held.note("q", Rates(1.0), [low])
    first = held.candidates("q", Rates(1.0), NOW)
    held.forget("q", Rates(1.0), first)
    assert (first, held.candidates("q", Rates(1.0), NOW)) == ([low], [])


def test_the_highest_priority_is_never_noted_to_give_way():
    held = HeldSlots()
    held.note("q", Rates(1.0), [Held(Slot(NOW + 5_000, NOW + 5_250), "", 9, "top", 1)])
    assert held.candidates("q", Rates(1.0), NOW) == []


def test_slots_noted_under_other_rates_are_not_offered():
    """A slot keeps the bounds of the rates it was allocated under: after a change of limits it stays."""
    held = HeldSlots()
    held.note("q", Rates(1.0), [Held(Slot(NOW + 5_000, NOW + 5_250), "", 1, "low", 1)])
    assert held.candidates("q", Rates(2.0), NOW) == []


@settings(max_examples=80, deadline=None)
@given(queue_rate=SLOW_RATES | st.none(), key_rate=SLOW_RATES | st.none(), data=st.data())
def test_giving_way_keeps_every_bound_never_makes_anyone_early_and_only_delays_the_victim(queue_rate, key_rate, data):
    """Batches of keyed starts of random priorities handed off in turn, each taking what it may of the slots
    held before it (each victim's write may lose); attempts start anywhere in their slots. Every scope holds
    the same slots as allocated, every bound holds, nobody is early, and a victim only moves later."""
    if queue_rate is None and key_rate is None:
        key_rate = 1.0
    rates = Rates(queue_rate, key_rate)
    keyed = key_rate is not None
    line = Line(rates)
    due: dict[str, int] = {}
    scope_of: dict[str, str] = {}
    slot_of: dict[str, Slot] = {}
    allocated: dict[str, list[int]] = defaultdict(list)
    held: list[Held] = []
    now = NOW
    for b in range(data.draw(st.integers(2, 5), label="batches")):
        drawn = data.draw(
            st.lists(st.tuples(st.integers(-2_000, 12_000), KEYS, st.integers(0, 9)), min_size=1, max_size=12),
            label=f"batch {b}",
        )
        now += data.draw(st.integers(0, 3_000), label=f"pause {b}")
        starts = [Start(now + offset, key, priority) for offset, key, priority in drawn]
        slots = list(line.allocate(starts, now))
        batch = held_of(starts, tuple(slots), len(due), keyed)
        for start, h in zip(starts, batch, strict=True):
            due[h.id], scope_of[h.id] = start.due_ms, h.scope
            allocated[h.scope].append(h.slot.start_ms)
        for way in give_way([h for h in held if h.slot.start_ms > now], starts, tuple(slots), now, keyed=keyed):
            held.remove(way.victim)
            if data.draw(st.booleans(), label="victim's write wins"):
                fresh = slots[way.index]
                assert fresh.start_ms > way.victim.slot.start_ms  # delayed, to the start's own fresh slot
                slots[way.index] = way.victim.slot
                slot_of[way.victim.id] = fresh
                held.append(Held(fresh, way.victim.scope, way.victim.priority, way.victim.id, 2))
        for h, slot in zip(batch, slots, strict=True):
            slot_of[h.id] = slot
            held.append(Held(slot, h.scope, h.priority, h.id, 1))
    assert all(slot_of[i].start_ms >= due[i] for i in due)  # never early
    final: dict[str, list[int]] = defaultdict(list)
    for i, slot in slot_of.items():
        final[scope_of[i]].append(slot.start_ms)
    assert {s: Counter(v) for s, v in final.items()} == {s: Counter(v) for s, v in allocated.items()}
    lateness = data.draw(st.lists(st.floats(0, 1), min_size=50, max_size=50), label="lateness")
    starts_at = {
        i: slot.start_ms + int(lateness[n % 50] * (slot.latest_ms - slot.start_ms))
        for n, (i, slot) in enumerate(slot_of.items())
    }
    if queue_rate is not None:
        assert worst_window_excess(list(starts_at.values()), queue_rate) <= 1e-9
    if key_rate is not None:
        for scope in final:
            assert worst_window_excess([at for i, at in starts_at.items() if scope_of[i] == scope], key_rate) <= 1e-9
