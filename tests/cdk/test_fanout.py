"""The sweeper may invoke itself (fan-out workers) and nothing else; timer senders deploy after the dispatcher."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.cdk.test_stack import function, synth

SWEEPER = "hourglass.handlers.sweeper.handler"
INGEST = "hourglass.handlers.api.handler"
DISPATCHER = "hourglass.handlers.dispatcher.handler"


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def invoke_statements(template: Template) -> list[tuple[list[Any], dict[str, Any]]]:
    """(roles, statement) of every policy statement that allows lambda:InvokeFunction."""
    found = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "lambda:InvokeFunction" in actions:
                found.append((policy["Properties"]["Roles"], statement))
    return found


def test_only_the_sweeper_role_may_invoke_functions(template: Template) -> None:
    _, sweeper = function(template, SWEEPER)
    role_ref = sweeper["Properties"]["Role"]["Fn::GetAtt"][0]
    roles = [roles for roles, _ in invoke_statements(template)]
    assert roles == [[{"Ref": role_ref}]]


def test_the_sweeper_may_invoke_only_itself(template: Template) -> None:
    sweeper_id, _ = function(template, SWEEPER)
    [(_, statement)] = invoke_statements(template)
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == {"Fn::GetAtt": [sweeper_id, "Arn"]}


def test_invoke_grant_is_not_in_the_policy_the_sweeper_depends_on(template: Template) -> None:
    _, sweeper = function(template, SWEEPER)
    statement = Match.object_like({"Sid": "InvokeSweepWorkers"})
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyDocument": {"Statement": Match.array_with([statement])}}}
    )
    assert len(policies) == 1
    assert not set(policies) & set(sweeper.get("DependsOn", []))


@pytest.mark.parametrize("handler", [INGEST, SWEEPER])
def test_timer_senders_are_deployed_after_the_dispatcher(template: Template, handler: str) -> None:
    dispatcher_id, _ = function(template, DISPATCHER)
    _, sender = function(template, handler)
    assert dispatcher_id in sender.get("DependsOn", [])
