"""README's "Deploy to AWS" block, word for word, against a fresh MiniStack (as its last section says)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import boto3
import pytest

from devstack.emulator import DUMMY_CREDENTIALS, free_port
from devstack.ministack import MiniStack
from tests.e2e.conftest import MODES

pytestmark = pytest.mark.skipif("deployed" not in MODES, reason="the deployed mode's tools: make test-deployed")
ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- deploy-to-aws:"


def deploy_block() -> str:
    readme = (ROOT / "README.md").read_text()
    after = readme[readme.index(MARKER) :]
    match = re.search(r"```sh\n(.*?)```", after, re.S)
    assert match is not None
    return match.group(1)


def test_the_readme_deploy_steps_work_word_for_word(tmp_path: Path) -> None:
    emulator = MiniStack.start(free_port())
    env = {
        **os.environ,
        **DUMMY_CREDENTIALS,
        "AWS_ENDPOINT_URL": emulator.endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        # The emulator runs each Lambda as a local process on a shared machine: on time is for AWS
        # (`make smoke`'s default 5 s); here the steps must work and every message arrive, never early.
        "SMOKE_LATE_LIMIT": "60",
    }
    env.pop("VIRTUAL_ENV", None)
    # README's local preamble: the context file that leaves out the metric-math alarm MiniStack refuses.
    context_file = ROOT / "cdk.context.json"
    context_file.write_text('{"hourglass:metric_math_alarms": false}\n')
    try:
        script = "set -euo pipefail\n" + deploy_block()
        result = subprocess.run(
            ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        (tmp_path / "readme-deploy.log").write_text(result.stdout + result.stderr)
        cfn = boto3.client("cloudformation", endpoint_url=emulator.endpoint_url, region_name="us-east-1")
        live = [s["StackName"] for s in cfn.describe_stacks()["Stacks"] if s["StackStatus"] != "DELETE_COMPLETE"]
    finally:
        emulator.stop()
        (ROOT / "cdk-outputs.json").unlink(missing_ok=True)
        context_file.unlink(missing_ok=True)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert '{"status":"ok","version":' in result.stdout.replace(" ", "")
    assert "smoke: OK, 3 messages on time" in result.stdout
    assert "Hourglass" not in live
