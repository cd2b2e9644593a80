"""The pacing items in DynamoDB (`adapters/pacing_storage.py`): a window's slots and guards, conditional writes
that return the winner's state, and the furthest window of the queue's own slots."""

from __future__ import annotations

from hourglass.core.pacing import Item, PaceState, Window

from tests.integration.conftest import Harness

WINDOW = Item(None, Window(1_000_000, 1_800_000_000))
KEY_WINDOW = Item("k#1", Window(1_000_000, 1_800_000_000))


def test_a_window_with_a_guard_reads_back_as_written(harness: Harness) -> None:
    store = harness.ctx.store
    written, state = store.advance_pace("q", WINDOW, PaceState(), (-1_249_999, 0, 35, 99_999), "record")
    assert written and store.pace_state("q", WINDOW) == state == PaceState((-1_249_999, 0, 35, 99_999), "record")


def test_a_lost_write_returns_the_winners_slots_and_record(harness: Harness) -> None:
    store = harness.ctx.store
    store.advance_pace("q", WINDOW, PaceState(), (10,), None)
    written, state = store.advance_pace("q", WINDOW, PaceState(), (20,), "mine")
    assert (written, state) == (False, PaceState((10,), None))


def test_a_keys_windows_are_apart_from_the_queues_and_from_another_keys(harness: Harness) -> None:
    store = harness.ctx.store
    store.advance_pace("q", KEY_WINDOW, PaceState(), (5,), None)
    other = Item("k", Window(1_000_000, 1_800_000_000))
    assert [store.pace_state("q", item).taken for item in (KEY_WINDOW, WINDOW, other)] == [(5,), None, None]
    width, index = KEY_WINDOW.window.width_us, KEY_WINDOW.window.index
    assert store.pace_windows("q", "k#1", width, index, 3) == {index: PaceState((5,), None)}


def test_the_last_window_gives_where_the_queues_slots_end(harness: Harness) -> None:
    store = harness.ctx.store
    store.advance_pace("q", WINDOW, PaceState(), (10, 700_000), None)
    later = Item(None, Window(1_000_000, WINDOW.window.index + 3))
    store.advance_pace("q", later, PaceState(), (-20, 250_000), None)
    assert store.last_window("q", 1_000_000) == later.window.index * 1_000_000 + 250_000
