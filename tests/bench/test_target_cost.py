"""The cost table's per-target rows: Hourglass's own cost plus each target service's list price."""

from __future__ import annotations

from bench.cost import target_costs


def test_each_target_type_costs_hourglass_plus_its_services_charge_per_million() -> None:
    assert target_costs(2.0) == {
        "http": 2.0,
        "sqs": 2.4,
        "lambda": 2.2,
        "sns": 2.5,
        "eventbridge": 3.0,
        "stepfunctions": 27.0,
    }
