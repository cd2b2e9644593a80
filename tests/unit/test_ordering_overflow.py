"""A long line of a key (v1.3, `core.ordering`): the key's item keeps the earliest INLINE waiters, later ones wait in
overflow items, moved back into the item as it empties; any sequence keeps the whole line, in due order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hourglass.adapters.items import item_size
from hourglass.adapters.ordering_storage import key_item
from hourglass.core import ordering
from hourglass.core.admission import MAX_FLOW_KEY
from hourglass.core.keys import order_overflow_prefix, order_overflow_sk, order_sk, split_order_sk
from hourglass.core.model import Ordering, Status
from hourglass.core.ordering import KeyState, Spilled, Turn, Waiter
from hypothesis import given, settings
from hypothesis import strategies as st

CONTINUE, HOLD = Ordering(), Ordering(on_failure="hold")


def w(message_id: str, due: int) -> Waiter:
    return Waiter(due, 0, message_id)


def line(*dues: int) -> tuple[Waiter, ...]:
    return tuple(w(f"m{due}", due) for due in dues)


@pytest.fixture(autouse=True)
def four_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ordering, "INLINE", 4)


def test_a_joiner_after_a_full_line_goes_to_an_overflow_item_and_bumps_the_key() -> None:
    state = KeyState(head="a", waiting=line(1, 2, 3, 4), version=5)
    turn = ordering.take(state, w("z", 9))
    assert (turn.spill, turn.state.waiting, turn.state.overflow, turn.changed) == (
        (w("z", 9),),
        line(1, 2, 3, 4),
        True,
        True,
    )


def test_a_joiner_before_the_last_of_a_full_line_pushes_that_one_to_overflow() -> None:
    turn = ordering.take(KeyState(head="a", waiting=line(1, 2, 4, 5)), w("m3", 3))
    assert (turn.state.waiting, turn.spill, turn.state.overflow) == (line(1, 2, 3, 4), line(5), True)


def test_with_overflow_a_joiner_after_the_last_inline_goes_to_overflow_though_the_item_has_room() -> None:
    turn = ordering.take(KeyState(head="a", waiting=line(1, 2, 3), overflow=True), w("z", 9))
    assert (turn.state.waiting, turn.spill) == (line(1, 2, 3), (w("z", 9),))


def test_with_overflow_a_joiner_before_the_last_inline_goes_inline() -> None:
    turn = ordering.take(KeyState(head="a", waiting=line(1, 2, 5), overflow=True), w("m3", 3))
    assert (turn.state.waiting, turn.spill) == (line(1, 2, 3, 5), ())


def test_a_waiter_in_overflow_seen_again_changes_nothing() -> None:
    me = w("z", 9)
    turn = ordering.take(KeyState(head="a", waiting=line(1, 2), overflow=True), me, (Spilled(me, "r"),))
    assert (turn.changed, turn.spill) == (False, ())


def test_a_waiter_in_overflow_that_takes_the_free_key_drops_its_item() -> None:
    me = w("m1", 1)
    turn = ordering.take(KeyState(waiting=line(5), overflow=True), me, (Spilled(me, "r"),))
    assert (turn.starts, turn.drop) == (True, (Spilled(me, "r"),))


def test_an_end_leaving_fewer_than_half_inline_with_overflow_refills() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=line(1, 2), overflow=True), "a", Status.DELIVERED, CONTINUE)
    assert ordering.needs_refill(turn) is True


def test_an_end_leaving_half_inline_does_not_refill() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=line(1, 2, 3), overflow=True), "a", Status.DELIVERED, CONTINUE)
    assert ordering.needs_refill(turn) is False


def keyed(*waiting: Waiter, head: str = "a", overflow: bool = True) -> Turn:
    return Turn(KeyState(head=head, waiting=waiting, overflow=overflow), False)


def test_a_refill_moves_the_earliest_overflow_waiters_in_and_drops_their_items() -> None:
    found = tuple(Spilled(x, "r") for x in line(5, 6, 7, 8))
    turn = ordering.refill(keyed(*line(2)), found[:3], complete=False)
    assert (turn.state.waiting, turn.drop, turn.state.overflow) == (line(2, 5, 6, 7), found[:3], True)


def test_a_refill_that_takes_every_overflow_waiter_clears_the_overflow() -> None:
    found = tuple(Spilled(x, "r") for x in line(5, 6))
    turn = ordering.refill(keyed(*line(2)), found, complete=True)
    assert (turn.state.waiting, turn.state.overflow) == (line(2, 5, 6), False)


def test_a_refill_skips_and_drops_items_of_messages_already_inline_or_head() -> None:
    stale = (Spilled(w("a", 0), "r1"), Spilled(w("m2", 2), "r2"))
    turn = ordering.refill(keyed(*line(2)), (*stale, Spilled(w("m7", 7), "r3")), complete=True)
    assert (turn.state.waiting, set(turn.drop)) == (line(2, 7), {*stale, Spilled(w("m7", 7), "r3")})


def test_a_refill_keeps_one_of_two_items_of_a_message_and_drops_both() -> None:
    twice = (Spilled(w("m7", 7), "r1"), Spilled(w("m7", 7), "r2"))
    turn = ordering.refill(keyed(*line(2)), twice, complete=True)
    assert (turn.state.waiting, set(turn.drop)) == (line(2, 7), set(twice))


def test_a_refill_takes_a_waiter_about_to_spill_in_its_due_place_and_spills_it_no_more() -> None:
    found = (Spilled(w("m6", 6), "r"),)
    turn = ordering.refill(replace(keyed(*line(2)), spill=line(5)), found, complete=True)
    assert (turn.state.waiting, turn.spill, turn.state.overflow) == (line(2, 5, 6), (), False)


def test_a_refill_of_a_partial_read_leaves_a_spilled_waiter_after_the_last_read_in_overflow() -> None:
    found = (Spilled(w("m5", 5), "r"),)
    turn = ordering.refill(replace(keyed(), spill=line(9)), found, complete=False)
    assert (turn.state.waiting, turn.spill, turn.state.overflow) == (line(5), line(9), True)


def test_a_key_handed_on_with_only_overflow_waiters_goes_to_the_first_of_them() -> None:
    turn = ordering.ended(KeyState(head="a", overflow=True), "a", Status.DELIVERED, CONTINUE)
    turn = ordering.refill(turn, (Spilled(w("m5", 5), "r"),), complete=True)
    assert (turn.state.head, turn.woken, turn.state.idle) == ("m5", "m5", False)


def test_a_waiter_that_ends_on_a_key_with_overflow_has_its_items_looked_for() -> None:
    me = w("z", 9)
    turn = ordering.ended(KeyState(head="a", waiting=line(1), overflow=True), "z", Status.CANCELLED, CONTINUE, me)
    assert (turn.changed, turn.left) == (False, me)


def test_a_waiter_that_ends_on_a_key_without_overflow_leaves_no_item_to_look_for() -> None:
    turn = ordering.ended(KeyState(head="a", waiting=line(1)), "m1", Status.CANCELLED, CONTINUE, w("m1", 1))
    assert (turn.state.waiting, turn.left) == ((), None)


def test_a_key_with_only_overflow_left_is_not_idle() -> None:
    assert KeyState(overflow=True).idle is False


def test_the_key_doc_counts_the_overflow_waiters() -> None:
    doc = ordering.key_doc("k", KeyState(head="a", waiting=line(1), overflow=True), overflowed=3)
    assert doc["waiting"] == 4


def test_overflow_items_sort_in_due_order_under_their_key_only() -> None:
    early = order_overflow_sk("a", 5, 9, "x", "r")
    late = order_overflow_sk("a", 10, 0, "b", "r")
    assert (early < late, early.startswith(order_overflow_prefix("a")), early.startswith(order_sk("a#w#"))) == (
        True,
        True,
        False,
    )
    assert (split_order_sk(order_sk("k#w")), split_order_sk(early)[0]) == (("k#w", ""), "a")


def test_a_full_key_item_of_the_longest_names_stays_under_one_kilobyte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ordering, "INLINE", 12)
    waiting = tuple(Waiter(1_795_255_203_000 + i, 1_795_255_200_000, f"{i:032x}") for i in range(ordering.INLINE))
    state = KeyState(head="f" * 32, held=True, waiting=waiting, overflow=True)
    assert item_size(key_item("q" * 64, "k" * MAX_FLOW_KEY, state, 10**9)) <= 1024


# any sequence --------------------------------------------------------------------------------
@dataclass
class Key:
    """A key's item and its overflow items, changed as `service.ordering._change` does (one writer at a time)."""

    state: KeyState = field(default_factory=KeyState)
    items: set[Spilled] = field(default_factory=set)
    placed: int = 0

    def apply(self, turn: Turn | None) -> Turn | None:
        if turn is None:
            return None
        if ordering.needs_refill(turn):
            ordered = sorted(self.items, key=lambda e: (e.waiter, e.ref))
            limit = 2 * ordering.INLINE
            turn = ordering.refill(turn, tuple(ordered[:limit]), complete=len(ordered) <= limit)
        for waiter in turn.spill:
            self.placed += 1
            self.items.add(Spilled(waiter, str(self.placed)))
        read, self.state = self.state, turn.state if turn.changed else self.state
        self.items -= set(turn.drop)
        if turn.left is not None and read.overflow:
            self.items = {e for e in self.items if e.waiter != turn.left}
        return turn


# Joins weigh most, so lines grow past INLINE and back.
kinds = st.sampled_from(["join"] * 5 + ["end", "end", "fail", "release", "cancel", "step_back", "again"])
operations = st.lists(st.tuples(kinds, st.integers(0, 40)), min_size=20, max_size=150)


@settings(max_examples=150, deadline=None)
@given(operations, st.sampled_from([CONTINUE, HOLD]))
def test_any_sequence_keeps_the_whole_line_in_due_order(steps: list[tuple[str, int]], rule: Ordering) -> None:
    key, waiting, made = Key(), set[Waiter](), 0
    for operation, pick in steps:
        state = key.state
        chosen = sorted(waiting)[pick % len(waiting)] if waiting else None
        if operation == "join":
            made += 1
            me = Waiter(pick, made, f"m{made}")
            turn = key.apply(ordering.take(state, me))
            waiting.add(me)
        elif operation == "again" and chosen is not None:
            queued = tuple(e for e in key.items if e.waiter == chosen)
            turn = key.apply(ordering.take(state, chosen, queued))
            assert turn is not None and turn.changed is False
        elif operation in ("end", "fail") and state.head is not None:
            status = Status.DELIVERED if operation == "end" else Status.FAILED
            turn = key.apply(ordering.ended(state, state.head, status, rule))
        elif operation == "release":
            turn = key.apply(ordering.release(state))
        elif operation in ("cancel", "step_back") and chosen is not None:
            step = ordering.ended if operation == "cancel" else ordering.stepped_back
            args = (Status.CANCELLED, rule) if operation == "cancel" else ()
            turn = key.apply(step(state, chosen.id, *args, waiter=chosen))  # type: ignore[operator]
            waiting.discard(chosen)
        else:
            continue
        if turn is not None and (turn.woken or (turn.starts and key.state.head)):
            head = turn.woken or key.state.head
            assert head == min(waiting).id, "the key goes to the earliest waiter"
            waiting = {x for x in waiting if x.id != head}
        inline = key.state.waiting
        spilled = sorted(e.waiter for e in key.items)
        assert list(inline) == sorted(inline) and len(inline) <= ordering.INLINE
        assert sorted((*inline, *spilled)) == sorted(waiting), "inline and overflow are the line, each once"
        assert not (inline and spilled) or inline[-1] < spilled[0], "the inline waiters are the earliest"
        assert not spilled or key.state.overflow
