"""`hourglass:auth`: the API's methods under an API key, IAM (SigV4) or both, and the managed policy under IAM.

The API construct is synthesized alone (an inline function behind it): the whole stack takes seconds per mode.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

import app as hourglass_app
from stacks.constructs.rest_api import IngestApi


def api_template(auth: str) -> Template:
    stack = cdk.Stack(cdk.App(), "AuthTest")
    handler = lambda_.Function(
        stack,
        "Ingest",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): return {}"),
    )
    IngestApi(stack, "Api", handler=handler, auth=auth)
    return Template.from_stack(stack)


@pytest.fixture(scope="module", params=["api_key", "iam", "both"])
def mode(request: pytest.FixtureRequest) -> tuple[str, Template]:
    return request.param, api_template(request.param)


def api_methods(template: Template) -> list[dict[str, Any]]:
    """Every method but the console's public page and assets."""
    resources = template.find_resources("AWS::ApiGateway::Resource")
    console = [{"Ref": k} for k, r in resources.items() if r["Properties"]["PathPart"] in ("console", "{asset}")]
    methods = template.find_resources("AWS::ApiGateway::Method")
    found = [m["Properties"] for m in methods.values() if m["Properties"].get("ResourceId") not in console]
    assert len(found) == len(methods) - 2 >= 2  # root ANY and {proxy+} ANY
    return found


def test_every_api_method_needs_what_the_mode_names(mode: tuple[str, Template]) -> None:
    auth, template = mode
    expected = {"api_key": ("NONE", True), "iam": ("AWS_IAM", False), "both": ("AWS_IAM", True)}[auth]
    assert {(m["AuthorizationType"], m.get("ApiKeyRequired", False)) for m in api_methods(template)} == {expected}


def test_the_console_page_stays_public_in_every_mode(mode: tuple[str, Template]) -> None:
    _, template = mode
    methods = template.find_resources("AWS::ApiGateway::Method", {"Properties": {"HttpMethod": "GET"}})
    public = [m for m in methods.values() if m["Properties"]["AuthorizationType"] == "NONE"]
    assert len(public) == 2 and all(m["Properties"]["ApiKeyRequired"] is False for m in public)


def test_a_key_and_its_usage_plan_exist_only_when_keys_are_checked(mode: tuple[str, Template]) -> None:
    auth, template = mode
    count = 0 if auth == "iam" else 1
    template.resource_count_is("AWS::ApiGateway::ApiKey", count)
    template.resource_count_is("AWS::ApiGateway::UsagePlan", count)
    template.resource_count_is("AWS::ApiGateway::UsagePlanKey", count)


def test_a_managed_policy_grants_invoke_on_this_api_only_under_iam(mode: tuple[str, Template]) -> None:
    auth, template = mode
    policies = template.find_resources("AWS::IAM::ManagedPolicy")
    if auth == "api_key":
        assert policies == {}
        return
    ((_, policy),) = policies.items()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke" and statement["Effect"] == "Allow"
    # arn:<partition>:execute-api:<region>:<account>:<this API's id>/prod/*/* (every method and path of the stage)
    parts = statement["Resource"]["Fn::Join"][1]
    (api_id,) = template.find_resources("AWS::ApiGateway::RestApi")
    assert parts[-2:] == [{"Ref": api_id}, "/prod/*/*"] and parts[-3] == ":"
    assert "*" not in json.dumps(parts[:-1]).replace('"*"', "")


@pytest.mark.parametrize(("given", "expected"), [(None, "api_key"), ("iam", "iam"), ("BOTH", "both")])
def test_the_setting_is_read_from_the_cdk_context(given: str | None, expected: str) -> None:
    context = {} if given is None else {"hourglass:auth": given}
    assert hourglass_app.settings_from_context(cdk.App(context=context)).auth == expected


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="auth"):
        hourglass_app.settings_from_context(cdk.App(context={"hourglass:auth": "oauth"}))
