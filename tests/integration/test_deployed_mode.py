"""The deployed mode's pieces that need no emulator: its switch, the API's local address, the outputs."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from devstack import outputs
from devstack.config import RuntimeConfig, deploy_mode
from devstack.deployed import DeployedStack, local_api_url


@pytest.mark.parametrize(
    ("value", "mode"), [("", "inprocess"), ("cdk", "cdk"), ("CDK", "cdk"), ("inprocess", "inprocess")]
)
def test_hourglass_deploy_picks_the_mode(value: str, mode: str) -> None:
    assert RuntimeConfig.from_env({"HOURGLASS_DEPLOY": value}).deploy == mode


def test_an_unknown_mode_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="HOURGLASS_DEPLOY='docker'"):
        deploy_mode("docker")


def test_the_api_url_output_becomes_the_emulators_path_style_address() -> None:
    url = local_api_url("https://ab12cd34.execute-api.us-east-1.amazonaws.com/prod/", "http://127.0.0.1:4601/")
    assert url == "http://127.0.0.1:4601/_aws/execute-api/ab12cd34/prod"


def test_a_url_that_is_not_an_api_gateway_stage_is_left_alone() -> None:
    assert local_api_url("https://api.example.com/v1/", "http://127.0.0.1:4601") == "https://api.example.com/v1/"


def test_the_deployed_mode_refuses_a_lookahead_within_the_sweep_minute() -> None:
    with pytest.raises(ValueError, match="HOURGLASS_LOOKAHEAD=60"):
        DeployedStack(RuntimeConfig(lookahead=60)).start()


def test_the_deployed_sweep_interval_is_at_least_a_minute() -> None:
    context = DeployedStack(RuntimeConfig(sweep_interval=1, lookahead=90)).cdk_context()
    assert (context["hourglass:sweep_interval"], context["hourglass:lookahead"]) == (60, 90)


def test_the_outputs_file_gives_the_local_url_and_the_keys_value(tmp_path: Path) -> None:
    with mock_aws():
        apigateway = boto3.client("apigateway", region_name="us-east-1")
        key = apigateway.create_api_key(name="k", value="the-key-value-1234567890")
        file = tmp_path / "cdk-outputs.json"
        stage = "https://ab12cd34.execute-api.us-east-1.amazonaws.com/prod/"
        file.write_text(json.dumps({"Hourglass": {"ApiUrl": stage, "ApiKeyId": key["id"]}}))
        local = outputs.exports(file, endpoint_url="http://127.0.0.1:4601", client=apigateway)
        remote = outputs.exports(file, client=apigateway)
    assert local == {
        "API_URL": "http://127.0.0.1:4601/_aws/execute-api/ab12cd34/prod/",
        "API_KEY": "the-key-value-1234567890",
    }
    assert remote["API_URL"] == stage


def test_order_due_off_reaches_the_stack_context() -> None:
    """`HOURGLASS_ORDER_DUE=0` for `make dev` deploys the stack without the `list` index."""
    config = RuntimeConfig.from_env({"HOURGLASS_ORDER_DUE": "0"})
    assert config.cdk_context()["hourglass:order_due"] is False


def test_order_created_off_reaches_the_stack_context() -> None:
    """`HOURGLASS_ORDER_CREATED=0` for `make dev` deploys the stack without the `created` list index."""
    config = RuntimeConfig.from_env({"HOURGLASS_ORDER_CREATED": "0"})
    assert config.cdk_context()["hourglass:order_created"] is False
