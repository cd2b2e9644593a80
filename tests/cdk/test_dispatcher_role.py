"""The dispatcher role's whole IAM statement list (issue 10's closing note), resources named by type."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.cdk.test_stack import _resources, function, synth

DISPATCHER = "hourglass.handlers.dispatcher.handler"
SWEEPER = "hourglass.handlers.sweeper.handler"
CONSUME = ("sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")
TABLE_DATA = (
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:UpdateItem",
)
BASE = {
    # Bodies: read to deliver, written for the schedule occurrences it chains (placed like posts).
    (
        ("s3:DeleteObject", "s3:GetObject", "s3:GetObjectTagging", "s3:PutObject", "s3:PutObjectTagging"),
        ("{AWS::S3::Bucket}/*",),
    ),
    (TABLE_DATA, ("{AWS::DynamoDB::Table}", "{AWS::DynamoDB::Table}/index/*")),
    ((*CONSUME, "sqs:ReceiveMessage", "sqs:SendMessage"), ("{AWS::SQS::Queue timer}",)),
    ((*CONSUME, "sqs:ReceiveMessage"), ("{AWS::SQS::Queue dlq}",)),
}


def statements(template: Template, handler: str = DISPATCHER) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(actions, resources) of each statement of a function's role; `{Logical.Arn}` becomes `{Type}`."""
    resources = template.to_json()["Resources"]
    _, fn = function(template, handler)
    role = {"Ref": fn["Properties"]["Role"]["Fn::GetAtt"][0]}

    def typed(match: re.Match[str]) -> str:
        resource: dict[str, Any] = resources[match.group(1)]
        kind = resource["Type"]
        if kind == "AWS::SQS::Queue":
            kind += " dlq" if "RedrivePolicy" not in resource["Properties"] else " timer"
        return "{" + kind + "}"

    found = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if role not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow" and "Condition" not in statement, statement
            actions = statement["Action"]
            actions = (actions,) if isinstance(actions, str) else tuple(sorted(actions))
            named = tuple(sorted(re.sub(r"\{([A-Za-z0-9]+)\.Arn\}", typed, r) for r in _resources(statement)))
            found.add((actions, named))
    return found


@pytest.mark.parametrize(
    ("targets", "send"),
    [
        (None, set()),
        (
            "orders-*,arn:aws:sqs:eu-west-1:123456789012:billing",
            {
                (
                    ("sqs:SendMessage",),
                    (
                        "arn:aws:sqs:eu-west-1:123456789012:billing",
                        "arn:{AWS::Partition}:sqs:{AWS::Region}:{AWS::AccountId}:orders-*",
                    ),
                )
            },
        ),
    ],
)
def test_the_dispatcher_role_holds_exactly_these_statements(targets: str | None, send: set[Any]) -> None:
    template = synth(**({"hourglass:sqs_targets": targets} if targets else {}))
    assert statements(template) == BASE | send


def test_the_sweeper_may_send_failure_notices_to_the_target_queues_only() -> None:
    template = synth(**{"hourglass:sqs_targets": "orders-*"})
    sends = {named for actions, named in statements(template, SWEEPER) if actions == ("sqs:SendMessage",)}
    assert sends == {("arn:{AWS::Partition}:sqs:{AWS::Region}:{AWS::AccountId}:orders-*",)}
