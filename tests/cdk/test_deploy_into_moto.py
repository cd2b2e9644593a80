"""Synthesize the app and deploy it through CloudFormation into a real moto server."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from hourglass.core import deadline, delivery_control

from devstack.deploy import DeployError, deploy, synth
from tests.local_stack import embedded_moto

REGION = "us-east-1"
# moto's CloudFormation skips resource types it does not model (API Gateway stage, key, usage plan).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with embedded_moto() as started:
        yield started


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth(tmp_path_factory.mktemp("cdk.out"), {"hourglass:lookahead": 240})


@pytest.fixture(scope="module")
def outputs(assembly: Path, endpoint: str) -> dict[str, str]:
    return deploy(assembly, endpoint_url=endpoint, region=REGION)


@pytest.fixture(scope="module")
def aws(endpoint: str) -> Any:
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    return lambda service: session.client(service, endpoint_url=endpoint)


def test_outputs_name_the_table_queues_and_functions(outputs: dict[str, str]) -> None:
    assert outputs["TableName"]
    assert outputs["TimerQueueUrl"].startswith("http")
    assert outputs["TimerDlqUrl"].startswith("http")
    for key in ("IngestFunctionName", "SweeperFunctionName", "DispatcherFunctionName"):
        assert outputs[key]


def test_the_asset_bucket_and_bootstrap_version_belong_to_a_cdktoolkit_stack(outputs: dict[str, str], aws: Any) -> None:
    resources = aws("cloudformation").describe_stack_resources(StackName="CDKToolkit")["StackResources"]
    version = aws("ssm").get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]["Value"]
    assert {(r["LogicalResourceId"], r["ResourceType"]) for r in resources} == {
        ("StagingBucket", "AWS::S3::Bucket"),
        ("CdkBootstrapVersion", "AWS::SSM::Parameter"),
    }
    assert version == "6"


def test_table_key_schema(outputs: dict[str, str], aws: Any) -> None:
    table = aws("dynamodb").describe_table(TableName=outputs["TableName"])["Table"]
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_table_has_the_due_index(outputs: dict[str, str], aws: Any) -> None:
    table = aws("dynamodb").describe_table(TableName=outputs["TableName"])["Table"]
    indexes = {index["IndexName"]: index for index in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"due", "list", "created"}
    index = indexes["due"]
    assert index["KeySchema"] == [
        {"AttributeName": "sweep_pk", "KeyType": "HASH"},
        {"AttributeName": "sweep_sk", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["version", "flow_key", "priority"]}


def test_table_ttl_is_enabled(outputs: dict[str, str], aws: Any) -> None:
    ttl = aws("dynamodb").describe_time_to_live(TableName=outputs["TableName"])
    assert ttl["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expire_at",
    }


def test_timer_queue_redrives_to_the_dlq(outputs: dict[str, str], aws: Any) -> None:
    sqs = aws("sqs")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=outputs["TimerDlqUrl"], AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=outputs["TimerQueueUrl"], AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == 10
    # Six dispatcher timeouts, sized for the longest attempt a queue's `timeout` allows.
    assert int(attributes["VisibilityTimeout"]) == deadline.visibility_timeout(delivery_control.MAX_TIMEOUT)


@pytest.mark.parametrize(
    ("output", "handler"),
    [
        ("IngestFunctionName", "hourglass.handlers.api.handler"),
        ("SweeperFunctionName", "hourglass.handlers.sweeper.handler"),
        ("DispatcherFunctionName", "hourglass.handlers.dispatcher.handler"),
    ],
)
def test_function_exists_with_settings(outputs: dict[str, str], aws: Any, output: str, handler: str) -> None:
    config = aws("lambda").get_function(FunctionName=outputs[output])["Configuration"]
    assert config["Handler"] == handler
    assert config["Runtime"] == "python3.12"
    assert config["Environment"]["Variables"] == {
        **config["Environment"]["Variables"],
        "HOURGLASS_TABLE": outputs["TableName"],
        "HOURGLASS_TIMER_QUEUE_URL": outputs["TimerQueueUrl"],
        "HOURGLASS_SHARDS": "8",
        "HOURGLASS_LOOKAHEAD": "240",
        "HOURGLASS_RETENTION_DAYS": "7",
        "HOURGLASS_ALLOW_PRIVATE_CALLBACKS": "0",
    }


def test_the_deployed_code_carries_the_zone_data(outputs: dict[str, str], aws: Any) -> None:
    config = aws("lambda").get_function(FunctionName=outputs["DispatcherFunctionName"])["Configuration"]
    buckets = [b["Name"] for b in aws("s3").list_buckets()["Buckets"]]
    bucket = next(name for name in buckets if name.startswith("cdk-hnb659fds-assets-"))
    key = next(o["Key"] for o in aws("s3").list_objects_v2(Bucket=bucket)["Contents"] if o["Key"].endswith(".zip"))
    data = aws("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert config["CodeSha256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert {"hourglass/handlers/dispatcher.py", "tzdata/zones", "tzdata/zoneinfo/Europe/London"} <= names


def test_dispatcher_consumes_the_timer_queue(outputs: dict[str, str], aws: Any) -> None:
    queue_arn = aws("sqs").get_queue_attributes(QueueUrl=outputs["TimerQueueUrl"], AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    mappings = aws("lambda").list_event_source_mappings(FunctionName=outputs["DispatcherFunctionName"])[
        "EventSourceMappings"
    ]
    # The timer DLQ has a mapping of its own (its consumer ends dead-lettered messages failed).
    (mapping,) = [m for m in mappings if m["EventSourceArn"] == queue_arn]
    assert mapping["BatchSize"] == 10
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_schedule_targets_the_sweeper(outputs: dict[str, str], aws: Any) -> None:
    events = aws("events")
    sweeper_arn = aws("lambda").get_function(FunctionName=outputs["SweeperFunctionName"])["Configuration"][
        "FunctionArn"
    ]
    (rule,) = events.list_rules()["Rules"]
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert [t["Arn"] for t in targets] == [sweeper_arn]


def test_second_deploy_updates_in_place(assembly: Path, endpoint: str, outputs: dict[str, str], aws: Any) -> None:
    again = deploy(assembly, endpoint_url=endpoint, region=REGION)

    stable = ("TableName", "TimerQueueUrl", "IngestFunctionName", "DispatcherFunctionName")
    assert {k: again[k] for k in stable} == {k: outputs[k] for k in stable}
    assert aws("cloudformation").describe_stacks(StackName="Hourglass")["Stacks"][0]["StackStatus"] in (
        "UPDATE_COMPLETE",
        "CREATE_COMPLETE",
    )
    functions = aws("lambda").list_functions()["Functions"]
    assert len([f for f in functions if f["FunctionName"].startswith("Hourglass-")]) == 3


def test_failed_deploy_reports_the_stack_events(tmp_path: Path, endpoint: str) -> None:
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "version": "55.0.0",
                "artifacts": {
                    "Broken": {
                        "type": "aws:cloudformation:stack",
                        "properties": {"templateFile": "Broken.template.json"},
                    }
                },
            }
        )
    )
    missing_dlq = f"arn:aws:sqs:{REGION}:123456789012:no-such-queue"
    (tmp_path / "Broken.template.json").write_text(
        json.dumps(
            {
                "Resources": {
                    "Queue": {
                        "Type": "AWS::SQS::Queue",
                        "Properties": {"RedrivePolicy": {"deadLetterTargetArn": missing_dlq, "maxReceiveCount": 3}},
                    }
                }
            }
        )
    )

    with pytest.raises(DeployError, match=r"(?s)'Broken'.*stack events"):
        deploy(tmp_path, endpoint_url=endpoint, region=REGION, stack_name="Broken")
