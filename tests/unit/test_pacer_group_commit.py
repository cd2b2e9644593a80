"""service.pacing: the Pacer's group commit (waiting requests share one pacing write, in due order) and the
start board (an attempt due earlier takes the slot of one due later)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from hourglass.core.pacing import Item, PaceState, Slot, pace
from hourglass.errors import StoreError
from hourglass.service.pacing import SWAP_MARGIN_MS, Pacer, StartBoard, Waiting

from tests.unit.pacing_items import PacingItems

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


class GatedStore(PacingItems):
    """Pacing items in memory whose first write waits until the test opens the gate."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail = fail
        self.calls = 0

    def advance_pace(
        self, queue: str, item: Item, expected: PaceState, taken: tuple[int, ...], new_held: str | None
    ) -> tuple[bool, PaceState]:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.gate.wait(5)
        if self.fail:
            raise StoreError("throttled")
        return super().advance_pace(queue, item, expected, taken, new_held)


def run_while_first_write_waits(store: GatedStore, later: list[list[int]]) -> tuple[list[object], list[object]]:
    """One request takes the queue's turn and blocks in its write; `later` requests queue up behind it."""
    pacer = Pacer(store)
    first: list[object] = []
    results: list[object] = [None] * len(later)

    def call(due: list[int], out: list[object], index: int) -> None:
        try:
            out[index] = pacer.slots("q", 100.0, due, NOW, lead_ms=0)
        except StoreError as exc:
            out[index] = exc

    first.append(None)
    leader = threading.Thread(target=call, args=([NOW_MS], first, 0))
    leader.start()
    assert store.entered.wait(5)
    threads = [threading.Thread(target=call, args=(due, results, i)) for i, due in enumerate(later)]
    for thread in threads:
        thread.start()
    while len(pacer._waiting.get("q", [])) < len(later):
        threading.Event().wait(0.01)
    store.gate.set()
    for thread in [leader, *threads]:
        thread.join(5)
    return first, results


def test_requests_waiting_for_the_turn_share_one_write_in_due_order() -> None:
    store = GatedStore()
    _, (late, early) = run_while_first_write_waits(store, [[NOW_MS + 5], [NOW_MS + 1]])
    spacing_ms = pace(100.0).spacing_us // 1000
    assert store.calls == 2  # the leader's, then one for both waiting requests (one window)
    assert early[0].start_ms + spacing_ms == late[0].start_ms  # type: ignore[index,attr-defined]


def test_a_failed_group_write_fails_every_request_of_the_group() -> None:
    store = GatedStore(fail=True)
    first, results = run_while_first_write_waits(store, [[NOW_MS], [NOW_MS + 1]])
    assert all(isinstance(r, StoreError) for r in [*first, *results])


def starts(*waiting: Waiting) -> list[int]:
    return [w.slot.start_ms for w in waiting]


def test_an_attempt_due_earlier_takes_the_earliest_slot_and_the_later_due_ones_move_down() -> None:
    board = StartBoard()
    b = board.join("q", 200, Slot(1_000, 1_900), lambda slot: True, now_ms=0)
    c = board.join("q", 300, Slot(2_000, 2_900), lambda slot: True, now_ms=0)
    a = board.join("q", 100, Slot(9_000, 9_900), lambda slot: True, now_ms=0)  # late, re-paced far away
    assert starts(a, b, c) == [1_000, 2_000, 9_000]
    assert board.start(a, 1_000) == Slot(1_000, 1_900) and board.start(b, 1_000) is None


def test_a_far_slot_passes_on_to_each_later_due_attempt_that_joins() -> None:
    board = StartBoard()
    late = board.join("q", 100, Slot(9_000, 9_900), lambda slot: True, now_ms=0)
    newer = board.join("q", 200, Slot(1_000, 1_900), lambda slot: True, now_ms=0)
    assert starts(late, newer) == [1_000, 9_000]
    newest = board.join("q", 300, Slot(1_500, 2_400), lambda slot: True, now_ms=0)
    assert starts(late, newer, newest) == [1_000, 1_500, 9_000]


def test_slots_are_not_dealt_again_when_one_would_not_fit_its_attempt() -> None:
    board = StartBoard()
    held = board.join("q", 200, Slot(1_000, 1_900), lambda slot: slot.start_ms < 3_000, now_ms=0)
    late = board.join("q", 100, Slot(9_000, 9_900), lambda slot: True, now_ms=0)
    assert starts(late, held) == [9_000, 1_000]


def test_a_slot_about_to_start_stays_with_its_attempt() -> None:
    board = StartBoard()
    imminent = board.join("q", 200, Slot(1_000, 1_900), lambda slot: True, now_ms=0)
    late = board.join("q", 100, Slot(9_000, 9_900), lambda slot: True, now_ms=1_000 - SWAP_MARGIN_MS)
    assert starts(late, imminent) == [9_000, 1_000]


def test_a_higher_priority_attempt_takes_the_earlier_slot_on_the_board():
    board = StartBoard()
    low = board.join("q", 100, Slot(1_000, 1_900), lambda slot: True, now_ms=0, priority=1)
    high = board.join("q", 200, Slot(2_000, 2_900), lambda slot: True, now_ms=0, priority=9)
    assert (high.slot.start_ms, low.slot.start_ms) == (1_000, 2_000)


def test_priority_never_gives_a_slot_before_the_attempts_due_time():
    board = StartBoard()
    low = board.join("q", 100, Slot(1_000, 1_900), lambda slot: True, now_ms=0, priority=1)
    high = board.join("q", 1_500, Slot(2_000, 2_900), lambda slot: True, now_ms=0, priority=9)
    assert (low.slot.start_ms, high.slot.start_ms) == (1_000, 2_000)
