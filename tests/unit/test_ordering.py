"""The ordering rules of a key (v1.3, `core.ordering`): who starts, who waits, who is woken, what a hold keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core import ordering
from hourglass.core.keys import ORDER_PREFIX, QUEUE_SCOPED_PREFIXES, order_sk
from hourglass.core.model import Message, Ordering, Status
from hourglass.core.ordering import KeyState, Waiter

CONTINUE, HOLD = Ordering(), Ordering(on_failure="hold")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def w(message_id: str, due: int, created: int = 0) -> Waiter:
    return Waiter(due, created, message_id)


def test_a_free_key_starts_its_first_message() -> None:
    turn = ordering.take(KeyState(), w("a", 10))
    assert (turn.starts, turn.state.head, turn.changed) == (True, "a", True)


def test_the_head_starts_again_without_a_write() -> None:
    turn = ordering.take(KeyState(head="a", version=3), w("a", 10))
    assert (turn.starts, turn.changed) == (True, False)


def test_a_message_waits_behind_the_head_in_due_order() -> None:
    state = KeyState(head="a", waiting=(w("c", 30),))
    turn = ordering.take(state, w("b", 20))
    assert (turn.starts, [x.id for x in turn.state.waiting]) == (False, ["b", "c"])


def test_equal_due_times_wait_in_creation_order() -> None:
    state = KeyState(head="a", waiting=(w("late", 20, created=5),))
    turn = ordering.take(state, w("early", 20, created=1))
    assert [x.id for x in turn.state.waiting] == ["early", "late"]


def test_a_waiter_seen_again_changes_nothing() -> None:
    state = KeyState(head="a", waiting=(w("b", 20),))
    assert ordering.take(state, w("b", 20)).changed is False


def test_a_held_key_keeps_every_other_message_waiting() -> None:
    turn = ordering.take(KeyState(head="a", held=True), w("b", 20))
    assert (turn.starts, turn.state.held) == (False, True)


def test_a_free_key_with_an_earlier_waiter_wakes_it_instead() -> None:
    turn = ordering.take(KeyState(waiting=(w("b", 10),)), w("c", 20))
    assert (turn.starts, turn.state.head, turn.woken, [x.id for x in turn.state.waiting]) == (False, "b", "b", ["c"])


def test_the_heads_end_hands_the_key_to_the_earliest_waiter() -> None:
    state = KeyState(head="a", waiting=(w("b", 20), w("c", 30)))
    turn = ordering.ended(state, "a", Status.DELIVERED, CONTINUE)
    assert (turn.state.head, turn.woken, len(turn.state.waiting)) == ("b", "b", 1)


def test_the_last_heads_end_leaves_the_key_idle() -> None:
    turn = ordering.ended(KeyState(head="a", version=1), "a", Status.EXPIRED, CONTINUE)
    assert (turn.state.idle, turn.woken) == (True, None)


def test_a_failure_goes_on_with_continue() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=(w("b", 20),)), "a", Status.FAILED, CONTINUE)
    assert (turn.state.head, turn.state.held) == ("b", False)


def test_a_failure_holds_with_hold() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=(w("b", 20),)), "a", Status.FAILED, HOLD)
    assert (turn.state.head, turn.state.held, turn.woken) == ("a", True, None)


def test_a_cancelled_waiter_leaves_the_line() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=(w("b", 20),)), "b", Status.CANCELLED, CONTINUE)
    assert (turn.state.head, turn.state.waiting) == ("a", ())


def test_an_unknown_message_ending_changes_nothing() -> None:
    assert ordering.ended(KeyState(head="a"), "z", Status.DELIVERED, CONTINUE).changed is False


def test_a_release_goes_on_with_the_next() -> None:
    turn = ordering.release(KeyState(head="a", held=True, waiting=(w("b", 20),)))
    assert turn is not None and (turn.state.head, turn.state.held, turn.woken) == ("b", False, "b")


def test_releasing_a_key_not_held_is_nothing() -> None:
    assert ordering.release(KeyState(head="a")) is None


def test_a_head_rescheduled_before_it_started_hands_the_key_on() -> None:
    turn = ordering.stepped_back(KeyState(head="a", waiting=(w("b", 20),)), "a")
    assert (turn.state.head, turn.woken) == ("b", "b")


def test_a_held_head_rescheduled_keeps_the_hold() -> None:
    turn = ordering.stepped_back(KeyState(head="a", held=True), "a")
    assert turn.changed is False


def message(message_id: str, due: datetime, status: Status = Status.PENDING) -> Message:
    return Message(id=message_id, queue="q", body=1, status=status, created_at=T0, due_at=due, flow_key="k")


def test_a_due_message_is_blocked_by_the_head() -> None:
    assert ordering.blocked_by(KeyState(head="a"), message("b", T0), T0) == "a"


def test_a_message_not_due_yet_is_blocked_by_nothing() -> None:
    assert ordering.blocked_by(KeyState(head="a"), message("b", T0 + timedelta(hours=1)), T0) is None


def test_the_head_is_blocked_by_nothing() -> None:
    assert ordering.blocked_by(KeyState(head="a"), message("a", T0), T0) is None


def test_a_lost_end_is_seen_from_the_heads_message() -> None:
    ended = message("a", T0, Status.DELIVERED)
    assert (ordering.head_ended(KeyState(head="a"), ended), ordering.head_ended(KeyState(head="a"), None)) == (
        True,
        True,
    )


def test_a_held_head_is_not_ended() -> None:
    assert ordering.head_ended(KeyState(head="a", held=True), message("a", T0, Status.FAILED)) is False


def test_a_key_doc() -> None:
    state = KeyState(head="a", waiting=(w("b", 20),))
    assert ordering.key_doc("k", state) == {"flow_key": "k", "head": "a", "waiting": 1, "held": False}


def test_order_items_go_with_their_queue_and_no_key_prefixes_another() -> None:
    assert ORDER_PREFIX in QUEUE_SCOPED_PREFIXES
    assert not order_sk("ab").startswith(order_sk("a"))


def test_a_head_not_started_yields_to_an_earlier_message_that_arrived_after_it() -> None:
    turn = ordering.yield_to_earlier(KeyState(head="b", waiting=(w("a", 10),)), w("b", 20))
    assert turn is not None and (turn.state.head, turn.woken, [x.id for x in turn.state.waiting]) == ("a", "a", ["b"])


def test_a_head_with_only_later_waiters_keeps_its_turn() -> None:
    assert ordering.yield_to_earlier(KeyState(head="b", waiting=(w("c", 30),)), w("b", 20)) is None
