"""Message identifiers."""

from __future__ import annotations

import pytest
from hourglass.core import keys
from hourglass.core.ids import deterministic_id, is_valid_id, new_id


def test_new_ids_are_valid_and_distinct():
    ids = {new_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(is_valid_id(i) for i in ids)


def test_deterministic_id_repeats_for_the_same_key():
    assert deterministic_id("orders", "k1") == deterministic_id("orders", "k1")


def test_deterministic_id_differs_by_queue_and_key():
    assert len({deterministic_id("a", "bc"), deterministic_id("ab", "c"), deterministic_id("a", "bd")}) == 3


@pytest.mark.parametrize("value", ["", "x" * 65, "ABC", "a b", "../etc", None, 5])
def test_invalid_ids(value):
    assert is_valid_id(value) is False


def test_new_ids_of_a_spread_queue_are_valid_spread_ids():
    ids = {new_id(64) for _ in range(100)}
    assert len(ids) == 100
    assert all(is_valid_id(i) and keys.spread_of(i) == 64 for i in ids)
