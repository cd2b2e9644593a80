"""A tiny run of the whole benchmark: the result has every target and sane figures (not the budgets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import ORDER, run_all

# The quick run of the benchmarks takes a minute or more on 2 cores: `make test-slow`.
pytestmark = pytest.mark.slow
TARGETS = ("precision", "sweep_scaling", "cost", "body_cost", "throughput", "schedules", "memory", "capacity")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("bench") / "latest.json"
    # delivery_limits starts a runtime of its own (~50 s even when quick): tests/bench/test_delivery_limits.py
    # and tests/e2e/test_rate_limits.py cover it. crash starts six (~3 min): tests/bench/test_crash.py and
    # tests/integration/test_crash_recovery.py cover it. loaded is the precision run with CPU hogs beside it (its
    # mechanism: tests/integration/test_slow_sweep.py); quick, it would only add a runtime's start-up. windows
    # waits for a whole-minute opening (up to 2 min): tests/e2e/test_windows.py and tests/integration/test_windows.py.
    # steady simulates a run per opt-in feature: tests/bench/test_steady.py covers it. ordering starts a runtime
    # too: tests/bench/test_ordering.py (its write units) and tests/e2e/test_ordering.py cover it.
    skipped = ("delivery_limits", "crash", "loaded", "windows", "steady", "ordering")
    doc = run_all(quick=True, out=out, only=tuple(t for t in ORDER if t not in skipped))
    assert out.is_file()
    return doc


def test_every_target_has_a_table(results: dict[str, Any]) -> None:
    assert all(results[key]["checks"] for key in TARGETS)


def test_nothing_is_delivered_early_or_lost(results: dict[str, Any]) -> None:
    targets = results["precision"]["targets"]
    assert [(t["early"], t["missing"]) for t in targets.values()] == [(0, 0), (0, 0)]


def test_no_occurrence_or_one_off_message_is_early_lost_or_duplicated(results: dict[str, Any]) -> None:
    section = results["schedules"]
    assert [(t["early"], t["missing"]) for t in section["targets"].values()] == [(0, 0), (0, 0)]
    assert section["duplicates"] == 0
    assert section["per_occurrence"]["write"] > 0


def test_the_sparse_index_reads_about_one_item_per_due_message(results: dict[str, Any]) -> None:
    rows = results["sweep_scaling"]["rows"]
    assert all(r["hourglass_items_read"] / r["due"] <= 1.1 for r in rows)
    assert all(r["scan_items_read"] > r["hourglass_items_read"] for r in rows)


def test_write_units_per_path_match_the_design(results: dict[str, Any]) -> None:
    dynamodb = results["cost"]["dynamodb"]
    assert dynamodb["errors"] == []
    assert dynamodb["hand_off_per_message"]["write"] == pytest.approx(5.0)  # 3 + the list indexes (due, created)
    # 5 + the list indexes: put and due-index entry, begin and its removal of the entry, outcome; no claim (a queue
    # without limits, ordering or schedules: `QueueLimits.claims`).
    assert dynamodb["swept_per_message"]["write"] == pytest.approx(7.0)


def test_throughput_and_memory_figures_are_positive(results: dict[str, Any]) -> None:
    assert all(stage["per_second"] > 0 for stage in results["throughput"]["stages"].values())
    assert all(h["peak_rss_mb"] > 0 for h in results["memory"]["handlers"].values())


def test_the_circuit_breaker_costs_one_write_per_attempt_and_half_a_read_per_failure(results: dict[str, Any]) -> None:
    """A failure reads the window eventually consistently: half a read unit (docs/capacity.md)."""
    per_attempt = results["circuit_breaker"]["per_attempt"]
    assert (per_attempt["none"], per_attempt["success"], per_attempt["failure"]) == ([0, 0], [1, 0], [1, 0.5])


def test_the_capacity_model_ran_every_scenario(results: dict[str, Any]) -> None:
    assert len(results["capacity"]["rows"]) == 6


def test_the_cost_by_body_size_has_every_row_and_the_log_budget(results: dict[str, Any]) -> None:
    section = results["body_cost"]
    assert len(section["rows"]) == 15
    assert section["measured"]["log_bytes_lone_message"] <= 1024
