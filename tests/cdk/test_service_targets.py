"""The stack's grants for Lambda, SNS, EventBridge and Step Functions targets: exactly the allow-lists, names
resolved through joins into the stack's account and region, never a `*` resource, never the stack's own."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.cdk.test_stack import _resolved, _resources, _statements, environments, synth

OWN = "arn:{AWS::Partition}:%s:{AWS::Region}:{AWS::AccountId}:%s"
SETTINGS = {
    "hourglass:lambda_targets": "orders-*,arn:aws:lambda:eu-west-1:999999999999:function:shared",
    "hourglass:sns_targets": "alerts",
    "hourglass:eventbridge_targets": "default",
    "hourglass:stepfunctions_targets": "flows-*",
}
GRANTED = {
    "lambda:InvokeFunction": [
        OWN % ("lambda", "function:orders-*"),
        "arn:aws:lambda:eu-west-1:999999999999:function:shared",
    ],
    "sns:Publish": [OWN % ("sns", "alerts")],
    "events:PutEvents": [OWN % ("events", "event-bus/default")],
    "states:StartExecution": [OWN % ("states", "stateMachine:flows-*")],
}


@pytest.fixture(scope="module")
def configured() -> Template:
    return synth(**SETTINGS)


@pytest.fixture(scope="module")
def unconfigured() -> Template:
    return synth()


def service_statements(template: Template) -> list[dict[str, Any]]:
    """Statements granting a target action (not the sweeper's invocation of itself, `InvokeSweepWorkers`)."""
    return [
        s
        for s in _statements(template)
        if isinstance(s["Action"], str) and s["Action"] in GRANTED and s.get("Sid") != "InvokeSweepWorkers"
    ]


def test_by_default_no_function_may_reach_a_service_target(unconfigured: Template) -> None:
    assert service_statements(unconfigured) == []


def test_the_dispatcher_and_sweeper_are_granted_exactly_the_allow_lists(configured: Template) -> None:
    statements = service_statements(configured)
    # Twice each: the dispatcher delivers there, the sweeper sends the failure notices left in the outbox.
    assert sorted((s["Action"], sorted(_resources(s))) for s in statements) == sorted(
        (action, sorted(arns)) for action, arns in GRANTED.items() for _ in range(2)
    )


def test_no_service_target_grant_is_a_bare_wildcard(configured: Template) -> None:
    resources = [r for s in service_statements(configured) for r in _resources(s)]
    assert all(not r.endswith((":*", "/*")) and r != "*" for r in resources)


def test_the_functions_read_the_same_lists_as_granted(configured: Template) -> None:
    variables = environments(configured)
    for kind, action in (("LAMBDA", "lambda:InvokeFunction"), ("SNS", "sns:Publish")):
        assert {_resolved(v[f"HOURGLASS_{kind}_TARGETS"]) for v in variables} == {",".join(GRANTED[action])}


def test_every_function_knows_the_stacks_name(configured: Template) -> None:
    assert {_resolved(v["HOURGLASS_STACK_NAME"]) for v in environments(configured)} == {"Hourglass"}


@pytest.mark.parametrize("entry", ["*", "Hourglass-*", "Hour*", "a b", "arn:aws:sns:us-east-1:123456789012:x"])
def test_an_entry_that_is_junk_too_wide_or_could_match_the_stacks_own_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        synth(**{"hourglass:lambda_targets": entry})
