"""service.pacing: the Pacer's group commit (waiting requests share one pacing write, in due order) and the
start board (an attempt due earlier takes the slot of one due later)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from hourglass.core.handoff import Timer
from hourglass.core.pacing import Rates, Slot, pace
from hourglass.errors import StoreError
from hourglass.service.pacing import SWAP_MARGIN_MS, PacedStarts, Pacer, StartBoard, Waiting

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


class GatedStore:
    """A pacing item in memory whose first write waits until the test opens the gate."""

    def __init__(self, fail: bool = False) -> None:
        self.next_us: int | None = None
        self.writes = 0
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail = fail

    def advance_pace(self, queue: str, expected_us: int | None, new_us: int) -> tuple[bool, int | None]:
        self.writes += 1
        if self.writes == 1:
            self.entered.set()
            self.gate.wait(5)
        if self.fail:
            raise StoreError("throttled")
        if self.next_us != expected_us:
            return False, self.next_us
        self.next_us = new_us
        return True, new_us


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
    assert store.writes == 2  # the leader's, then one for both waiting requests
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


def test_slots_within_a_waiting_attempts_margin_are_not_dealt() -> None:
    board = StartBoard()
    soon = board.join("q", 200, Slot(600, 1_500), lambda slot: True, now_ms=0)
    held = board.join("q", 100, Slot(9_000, 9_900), lambda slot: True, now_ms=0, margin_ms=750)  # not begun yet
    later = board.join("q", 300, Slot(2_000, 2_900), lambda slot: True, now_ms=0)
    assert starts(held, soon, later) == [2_000, 600, 9_000]


class HeldClock:
    """A fake clock whose first sleep lets a later-due attempt begin and join the board (another dispatcher
    thread, made deterministic)."""

    def __init__(self, board: StartBoard) -> None:
        self.now, self.board, self.joined = NOW, board, None

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.joined is None:
            due, slot = NOW_MS + 300, Slot(NOW_MS + 2_000, NOW_MS + 2_950)
            self.joined = self.board.join("q", due, slot, lambda slot: True, now_ms=NOW_MS)
        self.now += timedelta(seconds=max(0.0, seconds))


def test_a_re_paced_timer_held_in_its_dispatcher_takes_the_slot_of_a_later_due_attempt() -> None:
    """Its timer came after its slot, so it was re-paced at the end of the line; held for that far slot, it
    trades it with the attempt due after it that begins meanwhile, instead of starting after it."""
    paced = PacedStarts(SimpleNamespace())  # type: ignore[arg-type]
    clock = HeldClock(paced.board)
    paced.ctx = SimpleNamespace(clock=clock, sleep=clock.sleep)  # type: ignore[assignment]
    far = Timer("q", "late", 1, NOW_MS + 9_000, NOW_MS, NOW_MS + 9_950)
    held = paced.hold(far, Rates(20), rank_ms=NOW_MS + 100, deadline=None, repaces=0)
    assert held.slot == Slot(NOW_MS + 2_000, NOW_MS + 2_950)
    assert clock.joined is not None and clock.joined.slot == Slot(NOW_MS + 9_000, NOW_MS + 9_950)
