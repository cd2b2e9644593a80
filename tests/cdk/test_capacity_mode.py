"""`hourglass:capacity`: the table on demand (default), or provisioned with target tracking on the table and on
every index (docs/capacity.md)."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from tests.cdk.test_stack import synth

PROVISIONED = {
    "hourglass:capacity": "provisioned",
    "hourglass:capacity_min": "10",
    "hourglass:capacity_max": "2000",
    "hourglass:capacity_target": "60",
}
# Reads and writes of the table and of its three indexes (due, list, created).
SCALED = 2 * (1 + 3)


@pytest.fixture(scope="module")
def provisioned() -> Template:
    return synth(**PROVISIONED)


def test_the_table_is_on_demand_by_default() -> None:
    template = synth()
    template.has_resource_properties("AWS::DynamoDB::Table", {"BillingMode": "PAY_PER_REQUEST"})
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)


def test_provisioned_mode_starts_the_table_and_every_index_at_the_minimum(provisioned: Template) -> None:
    units = {"ReadCapacityUnits": 10, "WriteCapacityUnits": 10}
    provisioned.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": Match.absent(),
            "ProvisionedThroughput": units,
            "GlobalSecondaryIndexes": [
                Match.object_like({"IndexName": name, "ProvisionedThroughput": units})
                for name in ("due", "list", "created")
            ],
        },
    )


def test_provisioned_mode_scales_reads_and_writes_of_the_table_and_every_index(provisioned: Template) -> None:
    provisioned.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", SCALED)
    for dimension in ("ReadCapacityUnits", "WriteCapacityUnits"):
        for kind in ("table", "index"):
            provisioned.has_resource_properties(
                "AWS::ApplicationAutoScaling::ScalableTarget",
                {"ScalableDimension": f"dynamodb:{kind}:{dimension}", "MinCapacity": 10, "MaxCapacity": 2000},
            )


def test_provisioned_mode_tracks_the_target_utilisation(provisioned: Template) -> None:
    provisioned.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", SCALED)
    provisioned.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like({"TargetValue": 60}),
        },
    )


def test_without_the_created_index_provisioned_mode_scales_the_indexes_it_has() -> None:
    template = synth(**PROVISIONED, **{"hourglass:order_created": "false"})
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 2 * (1 + 2))


def test_without_either_list_order_provisioned_mode_scales_the_table_and_the_due_index() -> None:
    template = synth(**PROVISIONED, **{"hourglass:order_created": "false", "hourglass:order_due": "false"})
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 2 * (1 + 1))


@pytest.mark.parametrize(
    "context",
    [
        {"hourglass:capacity": "reserved"},
        {"hourglass:capacity": "provisioned", "hourglass:capacity_min": "0"},
        {"hourglass:capacity": "provisioned", "hourglass:capacity_min": "50", "hourglass:capacity_max": "10"},
        {"hourglass:capacity": "provisioned", "hourglass:capacity_target": "95"},
    ],
)
def test_a_bad_capacity_setting_is_refused(context: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="capacity"):
        synth(**context)
