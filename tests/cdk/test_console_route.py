"""The console's page is reachable without an API key; every other route still needs one."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk.assertions import Template

import app as hourglass_app

REPO_ROOT = Path(__file__).resolve().parents[2]


def template() -> Template:
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return Template.from_stack(hourglass_app.build(cdk.App(context=context)))


def test_console_paths_are_public_and_the_proxy_needs_a_key() -> None:
    synthesized = template()
    resources = synthesized.find_resources("AWS::ApiGateway::Resource")
    by_path = {r["Properties"]["PathPart"]: logical for logical, r in resources.items()}
    assert {"console", "{asset}", "{proxy+}"} <= set(by_path)
    for part in ("console", "{asset}"):
        synthesized.has_resource_properties(
            "AWS::ApiGateway::Method",
            {"HttpMethod": "GET", "ApiKeyRequired": False, "ResourceId": {"Ref": by_path[part]}},
        )
    synthesized.has_resource_properties(
        "AWS::ApiGateway::Method",
        {"HttpMethod": "ANY", "ApiKeyRequired": True, "ResourceId": {"Ref": by_path["{proxy+}"]}},
    )
    on_console = synthesized.find_resources(
        "AWS::ApiGateway::Method", {"Properties": {"ResourceId": {"Ref": by_path["console"]}}}
    )
    assert [m["Properties"]["HttpMethod"] for m in on_console.values()] == ["GET"]
