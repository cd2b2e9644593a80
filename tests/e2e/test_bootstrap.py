"""The devstack's stand-in bootstrap does not stand in the way of a later real `cdk bootstrap`."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from devstack import deploy
from devstack.deployed import run_cdk
from devstack.emulator import free_port, use_dummy_credentials
from devstack.ministack import MiniStack
from tests.e2e.conftest import MODES

pytestmark = pytest.mark.skipif("deployed" not in MODES, reason="the deployed mode's tools: make test-deployed")
ACCOUNT, REGION = "000000000000", "us-east-1"


def test_cdk_bootstrap_upgrades_the_stand_in_and_keeps_its_bucket(tmp_path: Path) -> None:
    use_dummy_credentials(REGION)
    emulator = MiniStack.start(free_port())
    try:
        client = lambda service: boto3.client(service, endpoint_url=emulator.endpoint_url, region_name=REGION)  # noqa: E731
        parameter = deploy.DEFAULT_BOOTSTRAP_PARAMETER
        deploy.ensure_bootstrap(client("cloudformation"), client("s3"), parameter, ACCOUNT, REGION, 120)
        run_cdk(
            "bootstrap", f"aws://{ACCOUNT}/{REGION}", endpoint_url=emulator.endpoint_url, region=REGION, logdir=tmp_path
        )
        [toolkit] = client("cloudformation").describe_stacks(StackName="CDKToolkit")["Stacks"]
        version = client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
        buckets = [b["Name"] for b in client("s3").list_buckets()["Buckets"]]
    finally:
        emulator.stop()
    assert toolkit["StackStatus"] == "UPDATE_COMPLETE"
    assert int(version) > int(deploy.BOOTSTRAP_VERSION)
    assert f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}" in buckets
