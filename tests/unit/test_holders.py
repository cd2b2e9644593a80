"""The record of who holds a scope's slots (`core.holders`): what an allocation, a give-way and a re-deal leave
in it, and that it never grows past its room."""

from __future__ import annotations

from hourglass.core import holders
from hourglass.core.pacing import Held, Slot, Start
from hypothesis import given, settings
from hypothesis import strategies as st

NOW = 1_800_000_000_000


def held(offset_ms: int, name: str, priority: int = 1, version: int = 1, scope: str = "") -> Held:
    return Held(Slot(NOW + offset_ms, NOW + offset_ms + 250, offset_ms % 2 == 0), scope, priority, name, version)


def test_a_record_reads_back_as_written():
    entries = [held(1_000, "a" * 32), held(2_250, "b-c", 0, 7), held(3_500, "f" * 64, 8, 300)]
    assert holders.parse(holders.render(entries), "") == entries


def test_an_empty_record_is_no_attribute():
    assert (holders.render([]), holders.parse(None, "k")) == (None, [])


def test_entries_well_past_and_of_a_message_taking_a_new_slot_leave():
    entries = [held(-holders.PAST_MS - 1, "old"), held(1_000, "moved"), held(2_000, "kept")]
    assert holders.recorded(entries, [held(9_000, "moved")], NOW, 10_000) == [entries[2], held(9_000, "moved")]


def test_new_entries_stop_at_the_room_and_never_push_out_a_listed_one():
    entries = [held(1_000, "first")]
    added = [held(2_000 + i, f"{i:032x}") for i in range(50)]
    room = 400
    kept = holders.recorded(entries, added, NOW, room)
    assert (kept[0], len(holders.render(kept) or "") <= room, 1 < len(kept) < 51) == (entries[0], True, True)


def test_a_re_deal_forgets_its_batchs_entries():
    entries = [held(1_000, "x"), held(2_000, "y"), held(3_000, "z")]
    assert holders.recorded(entries, [], NOW, 10_000, forget={"x", "y"}) == [entries[2]]


def test_the_taker_is_named_at_the_victims_slot_and_the_fresh_slot_is_unlisted():
    victim, taker_fresh = held(1_000, "low"), held(9_000, "high", 9)
    taker = held(1_000, "high", 9)
    assert holders.swapped([victim, taker_fresh], victim, taker, taker_fresh.slot) == [taker]


def test_a_slot_named_for_someone_else_is_taken():
    mine = [held(1_000, "x"), held(2_000, "y")]
    after = [held(1_000, "x"), held(2_000, "high", 9)]
    assert (holders.taken(after, mine), holders.taken(mine, mine), holders.taken([], mine)) == (True, False, False)


def test_only_starts_naming_a_version_below_the_highest_priority_are_listed():
    assert [holders.listed(s) for s in (Start(NOW, None, 8, ("a", 1)), Start(NOW, None, 9, ("b", 1)), Start(NOW))] == [
        True,
        False,
        False,
    ]


@settings(max_examples=60, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10**7), min_size=1, max_size=80, unique=True),
    room=st.integers(0, 1_200),
    priority=st.integers(0, 8),
)
def test_a_record_stays_within_its_room_and_in_slot_order(offsets, room, priority):
    kept: list[Held] = []
    for n, offset in enumerate(sorted(offsets)):
        kept = holders.recorded(kept, [held(offset, f"{n:032x}", priority)], NOW, room)
    text = holders.render(kept) or ""
    assert len(text) <= room
    assert [h.slot.start_ms for h in holders.parse(text, "")] == sorted(h.slot.start_ms for h in kept)
