"""The stack each mode runs: which of the template's resources exist, and the table's settings."""

from __future__ import annotations

from tests.e2e.conftest import Stack

# moto's CloudFormation does not model these (devstack.deploy reports them at start-up); the in-process
# runtime's gateway stands in for the API's key and stage, and nothing local needs the others.
MOTO_SKIPS = {
    "AWS::ApiGateway::ApiKey",
    "AWS::ApiGateway::Stage",
    "AWS::ApiGateway::UsagePlan",
    "AWS::ApiGateway::UsagePlanKey",
    "AWS::CloudWatch::Alarm",
    "AWS::Logs::MetricFilter",
    "AWS::S3::BucketPolicy",
}


def test_every_resource_of_the_template_is_created(stack: Stack) -> None:
    described = stack.client("cloudformation").describe_stack_resources(StackName="Hourglass")["StackResources"]
    created = {
        r.get("LogicalResourceId") for r in described if r["ResourceStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
    }
    wanted = {
        logical_id
        for logical_id, resource in stack.template["Resources"].items()
        # Conditional resources (the alarm e-mail subscription, without an address) are rightly absent.
        if resource["Type"] != "AWS::CDK::Metadata"
        and "Condition" not in resource
        and not (stack.mode == "inprocess" and resource["Type"] in MOTO_SKIPS)
    }
    assert wanted - created == set()


def test_the_table_expires_items_and_keeps_point_in_time_recovery(stack: Stack) -> None:
    ddb = stack.client("dynamodb")
    table = stack.outputs["TableName"]
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    pitr = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expire_at")
    assert pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
