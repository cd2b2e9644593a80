"""A small run of the bulk-operation bench on its own emulator: every message applied once, figures present."""

from __future__ import annotations

import pytest

from bench.bulk_operations import run


@pytest.mark.parametrize("action", ["shift", "redeliver"])
def test_every_matched_message_is_applied_once_and_the_cpu_figures_are_reported(action: str) -> None:
    result = run(300, action)
    assert (result["status"], result["matched"], result["applied"]) == ("succeeded", 300, 300)
    assert result["emulator_cpu_per_1000"] > 0 and result["workers_cpu_per_1000"] > 0
