"""The pacing part of rate_limit 10,000 (bench.pacing_rate): what the Pacer writes is the rule's, within the bound."""

from __future__ import annotations

import pytest

from bench.pacing_rate import PROCESSES, core_run, stored_run


def test_the_pacer_writes_each_window_once_per_batch_as_the_rule_says() -> None:
    stored = stored_run(100, seconds=0.1)
    core = core_run(100, seconds=0.1)
    assert (stored.run.slots, stored.run.writes) == (1_000, core.writes)
    assert stored.units_per_slot == pytest.approx(core.writes / 1_000)
    assert stored.run.spacing_ok


def test_at_10_000_a_second_no_pacing_item_nor_the_queue_s_pacing_items_together_pass_a_partition_s_limit() -> None:
    for batch in (100, 500):
        run = core_run(batch)
        assert run.slots == 10_000 and run.spacing_ok
        assert run.peak_item <= 4 and run.peak_total < 1_000


def test_allocators_that_lose_writes_to_each_other_keep_the_bound() -> None:
    run = stored_run(100, seconds=0.1, processes=PROCESSES).run
    assert run.slots == 1_000 and run.spacing_ok
