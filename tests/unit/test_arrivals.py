"""The dispatcher's arrival board (v1.3): a timer of an ordered queue's key waits for the ones of its key due before
it that the process received, and for no other."""

from __future__ import annotations

import threading
import time

from hourglass.core.handoff import Timer
from hourglass.service.dispatch.arrivals import ArrivalBoard


def timer(message_id: str, due_ms: int, key: str | None = "k", queue: str = "q") -> Timer:
    return Timer(queue, message_id, 1, due_ms, 0, key=key)


def test_nothing_due_before_it_means_no_wait() -> None:
    board = ArrivalBoard()
    later, mine, other_key = timer("b", 20), timer("a", 10), timer("c", 1, key="x")
    board.arrived([later, mine, other_key])
    started = time.monotonic()
    board.wait_for_earlier(mine, timeout=5)
    assert time.monotonic() - started < 1


def test_it_waits_until_the_earlier_one_has_had_its_turn() -> None:
    board = ArrivalBoard()
    earlier, mine = timer("a", 10), timer("b", 20)
    board.arrived([earlier, mine])
    order: list[str] = []

    def first() -> None:
        time.sleep(0.05)
        order.append("a")
        board.left(earlier)

    thread = threading.Thread(target=first)
    thread.start()
    board.wait_for_earlier(mine, timeout=5)
    order.append("b")
    thread.join()
    assert order == ["a", "b"]


def test_the_wait_is_bounded() -> None:
    board = ArrivalBoard()
    earlier, mine = timer("a", 10), timer("b", 20)
    board.arrived([earlier, mine])
    started = time.monotonic()
    board.wait_for_earlier(mine, timeout=0.05)
    assert 0.04 <= time.monotonic() - started < 1


def test_leaving_twice_is_harmless() -> None:
    board = ArrivalBoard()
    earlier, mine = timer("a", 10), timer("b", 20)
    board.arrived([earlier, mine])
    board.left(earlier)
    board.left(earlier)
    started = time.monotonic()
    board.wait_for_earlier(mine, timeout=5)
    assert time.monotonic() - started < 1
