"""Synthesized template of the optional analytics stack: EMR Serverless, bucket, least-privilege job role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from hourglass import contract

import app as hourglass_app
from stacks.constructs.analytics import DRIVER_ENV, SparkCapacity

REPO_ROOT = Path(__file__).resolve().parents[2]


def spark_defaults(template: Template) -> dict[str, Any]:
    (application,) = template.find_resources("AWS::EMRServerless::Application").values()
    (defaults,) = application["Properties"]["RuntimeConfiguration"]
    return dict(defaults["Properties"])


def build(**context: object) -> cdk.App:
    merged = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    merged.update(context)
    app = cdk.App(context=merged)
    hourglass_app.build(app)
    return app


def analytics(**context: object) -> Template:
    stack = build(**{"hourglass:analytics": "true", **context}).node.find_child(hourglass_app.ANALYTICS_STACK_ID)
    assert isinstance(stack, cdk.Stack)
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def template() -> Template:
    return analytics()


@pytest.fixture(scope="module")
def scheduling() -> Template:
    return analytics(**{"hourglass:analytics_schedule": "true"})


def allowed_actions(template: Template) -> list[str]:
    """Every action an Allow statement grants, in role, managed and bucket policies."""
    documents: list[Any] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        documents.append(policy["Properties"]["PolicyDocument"])
    for role in template.find_resources("AWS::IAM::Role").values():
        documents += [p["PolicyDocument"] for p in role["Properties"].get("Policies", [])]
    for policy in template.find_resources("AWS::S3::BucketPolicy").values():
        documents.append(policy["Properties"]["PolicyDocument"])
    actions: list[str] = []
    for document in documents:
        for statement in document["Statement"]:
            if statement["Effect"] == "Allow":
                granted = statement["Action"]
                actions += granted if isinstance(granted, list) else [granted]
    return actions


def test_not_synthesized_unless_requested() -> None:
    assert build().node.try_find_child(hourglass_app.ANALYTICS_STACK_ID) is None


def test_application_runs_spark(template: Template) -> None:
    template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "Type": "SPARK",
            "ReleaseLabel": Match.string_like_regexp(r"^emr-spark-8\."),
            "Architecture": "X86_64",
            "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": Match.any_value()},
        },
    )


def test_job_logs_go_to_the_bucket(template: Template) -> None:
    (bucket,) = template.find_resources("AWS::S3::Bucket")
    template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "MonitoringConfiguration": {
                "S3MonitoringConfiguration": {
                    "LogUri": {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/logs/"]]},
                }
            }
        },
    )


def test_jobs_are_sized_within_the_application_maximum(template: Template) -> None:
    capacity = SparkCapacity()
    defaults = capacity.spark_defaults()
    template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {"RuntimeConfiguration": [{"Classification": "spark-defaults", "Properties": defaults}]},
    )
    cores = int(defaults["spark.driver.cores"]) + capacity.max_executors * int(defaults["spark.executor.cores"])
    assert cores <= int(capacity.max_cpu.split()[0])


def test_bucket_is_encrypted_and_private(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
        },
    )


def test_bucket_refuses_plain_http(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_job_role_is_assumed_by_emr_serverless_only(template: Template) -> None:
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Action": "sts:AssumeRole",
                            "Principal": {"Service": "emr-serverless.amazonaws.com"},
                            "Condition": Match.object_like({"StringEquals": Match.any_value()}),
                        }
                    )
                ]
            }
        },
    )


@pytest.mark.parametrize("variant", ["template", "scheduling"])
def test_no_wildcard_actions(variant: str, request: pytest.FixtureRequest) -> None:
    actions = allowed_actions(request.getfixturevalue(variant))
    assert actions
    assert [a for a in actions if "*" in a] == []


def test_read_only_by_default(template: Template) -> None:
    actions = allowed_actions(template)
    assert {"dynamodb:Scan", "s3:GetObject", "s3:PutObject"} <= set(actions)
    assert "dynamodb:BatchWriteItem" not in actions
    assert not [a for a in actions if a.startswith("sqs:")]


def test_scheduling_may_write_the_table_and_send_timers(scheduling: Template) -> None:
    actions = allowed_actions(scheduling)
    assert {"dynamodb:BatchWriteItem", "dynamodb:BatchGetItem", "sqs:SendMessage"} <= set(actions)


def test_scheduling_may_read_the_hourglass_stacks_layout_outputs(scheduling: Template) -> None:
    # The schedule job reads shards, bucket width and look-ahead from the stack's outputs (`resolve_timing`).
    statements = [
        s
        for policy in scheduling.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "cloudformation:DescribeStacks"
    ]
    assert len(statements) == 1
    assert f":stack/{hourglass_app.STACK_ID}/*" in json.dumps(statements[0]["Resource"])


def test_read_only_jobs_may_not_describe_stacks(template: Template) -> None:
    assert "cloudformation:DescribeStacks" not in allowed_actions(template)


def test_outputs_name_application_role_and_bucket(template: Template) -> None:
    assert {"ApplicationId", "JobRoleArn", "BucketName", "LogUri"} <= set(template.find_outputs("*"))


def test_the_schedule_jobs_driver_gets_the_target_allow_lists_the_functions_get() -> None:
    context = {"hourglass:sqs_targets": "orders-*", "hourglass:lambda_targets": "billing-*"}
    app = build(**{"hourglass:analytics": "true", "hourglass:analytics_schedule": "true", **context})
    functions = Template.from_stack(app.node.find_child(hourglass_app.STACK_ID)).find_resources("AWS::Lambda::Function")
    ingest = next(f for f in functions.values() if contract.TABLE in f["Properties"]["Environment"]["Variables"])
    spark = app.node.find_child(hourglass_app.ANALYTICS_STACK_ID)
    assert isinstance(spark, cdk.Stack)
    defaults = spark_defaults(Template.from_stack(spark))

    names = (contract.SQS_TARGETS, contract.SERVICE_TARGETS["lambda"], contract.STACK_NAME)
    assert {n: defaults[DRIVER_ENV + n] for n in names} == {
        n: ingest["Properties"]["Environment"]["Variables"][n] for n in names
    }
    assert defaults[DRIVER_ENV + contract.SQS_TARGETS] == "orders-*"
    assert DRIVER_ENV + contract.TIMER_DLQ_URL in defaults


def test_read_only_jobs_get_no_allow_lists(template: Template) -> None:
    assert not [name for name in spark_defaults(template) if name.startswith(DRIVER_ENV + "HOURGLASS_")]
