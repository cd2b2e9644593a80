"""The deployment smoke test (`make smoke`) as a user runs it, against each mode's stack."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.e2e.conftest import Stack


def smoke(stack: Stack, api_key: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_ENDPOINT_URL": stack.endpoint_url, "AWS_DEFAULT_REGION": "us-east-1"}
    command = [sys.executable, "-m", "devstack.smoke", "--api-url", stack.api_url, "--api-key", api_key]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_smoke_test_passes_and_leaves_no_queue_behind(stack: Stack) -> None:
    result = smoke(stack, stack.api_key)
    leftovers = stack.client("sqs").list_queues(QueueNamePrefix="hourglass-smoke-").get("QueueUrls", [])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 messages on time" in result.stdout
    assert leftovers == []


def test_the_smoke_test_fails_on_a_wrong_key(stack: Stack) -> None:
    result = smoke(stack, "not-the-key")
    assert result.returncode == 1
    assert "HTTP 403" in result.stderr
