"""What the stack sets for throughput (docs/capacity.md): the dispatcher's event-source maximum concurrency, and
warm throughput on the table and its due index when asked for."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from tests.cdk.test_stack import synth


@pytest.fixture(scope="module")
def warm() -> Template:
    return synth(**{"hourglass:warm_writes": "40000", "hourglass:warm_reads": "12000"})


def test_the_dispatchers_event_source_may_use_its_whole_ceiling() -> None:
    synth().has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": Match.any_value(), "ScalingConfig": {"MaximumConcurrency": 1000}},
    )


def test_the_dispatchers_event_source_maximum_is_a_setting() -> None:
    synth(**{"hourglass:dispatch_concurrency": "200"}).has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"ScalingConfig": {"MaximumConcurrency": 200}}
    )


def test_the_table_is_not_warmed_by_default() -> None:
    synth().has_resource_properties("AWS::DynamoDB::Table", {"WarmThroughput": Match.absent()})


def test_a_warmed_table_serves_its_peak_at_once(warm: Template) -> None:
    warm.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"WarmThroughput": {"WriteUnitsPerSecond": 40000, "ReadUnitsPerSecond": 12000}},
    )


def test_a_warmed_tables_due_index_is_warmed_too(warm: Template) -> None:
    warm.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [Match.object_like({"IndexName": "due", "WarmThroughput": {"WriteUnitsPerSecond": 40000}})]
            )
        },
    )


def test_a_dispatch_concurrency_beyond_the_event_sources_ceiling_is_refused() -> None:
    with pytest.raises(ValueError, match="dispatch_concurrency"):
        synth(**{"hourglass:dispatch_concurrency": "5000"})
