"""The steady-load cost figure: counted from the requests a short slice of 1,000 msg/s makes (not the budgets)."""

from __future__ import annotations

import pytest

from bench import steady
from devstack.emulator import use_dummy_credentials


@pytest.fixture(scope="module")
def run() -> steady.Counted:
    use_dummy_credentials("us-east-1")
    return steady.base(0.2)


def test_every_message_of_the_slice_is_delivered(run: steady.Counted) -> None:
    assert run.delivered == run.messages == 200


def test_the_dispatcher_gets_full_packs_at_this_rate(run: steady.Counted) -> None:
    assert run.messages / run.invocations["dispatcher"] == steady.DISPATCH_BATCH_SIZE * 10


def test_a_sweep_runs_state_is_shared_among_a_whole_runs_messages(run: steady.Counted) -> None:
    assert run.per_message(run.write)["sweeper state"] < 0.001


def test_provisioned_capacity_costs_less_than_on_demand(run: steady.Counted) -> None:
    assert 0 < run.dollars(provisioned=True)["total"] < run.dollars()["total"]


def test_an_order_created_index_adds_one_write_unit_per_message(run: steady.Counted) -> None:
    with_index = steady.simulate(0.1, order_created=True, order_due=False)
    assert sum(with_index.per_message(with_index.write).values()) == pytest.approx(
        sum(run.per_message(run.write).values()) + 1, abs=0.05
    )


def test_an_order_due_index_adds_one_write_unit_per_message(run: steady.Counted) -> None:
    with_index = steady.simulate(0.1, order_created=False, order_due=True)
    assert sum(with_index.per_message(with_index.write).values()) == pytest.approx(
        sum(run.per_message(run.write).values()) + 1, abs=0.05
    )


def test_the_hand_off_path_costs_less_than_the_sweep_path(run: steady.Counted) -> None:
    handoff = steady.base(0.1, steady.HANDOFF_DELAY)
    assert handoff.delivered == handoff.messages
    assert handoff.dollars()["total"] < run.dollars()["total"]
