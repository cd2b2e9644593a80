"""The history cost section prices the real history items by DynamoDB's rules."""

from __future__ import annotations

from bench import history_cost


def test_a_first_time_delivery_costs_no_extra_write_unit() -> None:
    assert history_cost.history_units(1)[0] == 0


def test_a_message_finished_at_attempt_k_costs_two_k_minus_two() -> None:
    assert [history_cost.history_units(k)[0] for k in (2, 5)] == [2, 8]


def test_section_meets_its_budgets() -> None:
    assert history_cost.section().passed
