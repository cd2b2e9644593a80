"""The cost-by-body-size model: priced from the items the layout writes, not typed in."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bench import body_cost
from bench.capacity_units import CapacityMeter
from bench.cost import MEMORY_GB
from bench.log_bytes import PLATFORM_BYTES_PER_INVOCATION, Captured
from bench.report import Section

DAY = timedelta(days=1)


def units(size: int, path: str = "sweep", **kwargs: bool) -> body_cost.Units:
    return body_cost.layout_units(size, path=path, delay=DAY, **kwargs)


def test_a_small_body_costs_what_the_design_says() -> None:
    assert (units(100).write, units(100, "hand-off").write) == (6, 3)


def test_a_small_body_stays_inline() -> None:
    assert units(100).placement == "inline"


def test_a_body_item_is_written_once_whatever_the_path() -> None:
    sweep_extra = units(4096).write - units(100).write
    handoff_extra = units(4096, "hand-off").write - units(100, "hand-off").write
    assert units(4096).placement == "item" and sweep_extra == handoff_extra == 5


def test_a_body_item_is_read_once_at_delivery() -> None:
    assert (units(100).read, units(4096).read) == (0, 2)


def test_a_large_body_costs_the_message_item_nothing_more() -> None:
    large = units(64 * 1024)
    assert (large.placement, large.write, large.s3_put, large.s3_get) == ("s3", units(100).write, 1, 1)


def test_the_old_layout_writes_the_body_with_every_state_change() -> None:
    assert units(64 * 1024, inline_always=True).write >= 258


def test_the_largest_body_keeps_the_message_item_within_one_write_unit() -> None:
    assert units(256 * 1024).max_item_bytes <= 1024


def test_every_size_path_and_delay_has_a_row() -> None:
    rows = body_cost.rows(body_cost.Measured())
    assert len(rows) == len(body_cost.SIZES) * 3


def test_the_section_checks_each_budgeted_size() -> None:
    section = body_cost.section(body_cost.Measured(), source="defaults")
    budgeted = [c for c in section.checks if c.name.startswith("all-in") and c.passed is not None]
    assert len(budgeted) == len(body_cost.BUDGETS)


def test_storage_makes_a_thirty_day_delay_cost_more() -> None:
    measured = body_cost.Measured()
    one = body_cost.dollars(units(64 * 1024), measured)["total"]
    thirty = body_cost.dollars(body_cost.layout_units(64 * 1024, path="sweep", delay=30 * DAY), measured)["total"]
    assert thirty > one


def test_measured_figures_are_per_delivered_message() -> None:
    cost = Section("cost", "cost")
    cost.data.update(
        {
            "messages": {"delivered": 100},
            "lambda": {"dispatcher": {"invocations": 10, "seconds": 20.0}},
            "sqs_requests": {"SendMessageBatch": 10, "ReceiveMessage": 10, "DeleteMessageBatch": 10},
            "dynamodb": {"shared": {"sweeper state": {"write": 5.0, "read": 5.0}}, "swept_per_message": {"read": 0.2}},
        }
    )
    lone, batch = Captured(1, ["x" * 99]), Captured(10, ["y" * 199] * 10)
    measured = body_cost.measured_from(cost, lone, batch)
    dispatcher_gb = MEMORY_GB["dispatcher"]
    assert (measured.sqs_requests, measured.lambda_invocations) == (0.3, 0.1)
    assert measured.lambda_gb_seconds == pytest.approx(20.0 * dispatcher_gb / 100)
    assert measured.log_bytes == pytest.approx(200 + PLATFORM_BYTES_PER_INVOCATION * 0.1)
    assert (measured.log_bytes_lone_message, measured.shared_write_units) == (100, 0.05)


def test_a_body_items_units_are_its_messages() -> None:
    meter = CapacityMeter("messages", [])
    meter("put_item", {"Item": {"pk": {"S": "q"}, "sk": {"S": "b#ab12#1"}, "body": {"S": "x" * 3000}}})
    keys, _ = meter.snapshot()
    assert {key: u.write for key, u in keys.items()} == {("q", "m#ab12"): 3.0}
