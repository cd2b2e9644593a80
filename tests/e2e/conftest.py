"""End-to-end fixtures: the stack in each mode under test, a loopback receiver.

HOURGLASS_E2E_MODES (comma-separated) picks the modes: "inprocess" (the handlers in this process on a
moto_server; the default) and "deployed" (`cdk deploy` into MiniStack, the Lambdas running there).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest

from devstack import api_call
from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.emulator import free_port
from devstack.runtime import cached_synth
from tests.local_stack import local_runtime
from tests.loopback import CallbackReceiver

MODES = [mode.strip() for mode in os.environ.get("HOURGLASS_E2E_MODES", "inprocess").split(",") if mode.strip()]
LATENESS: dict[str, list[float]] = {}
API_KEY = "e2e-api-key"
# The deployed mode's Lambda timeout-free margin: a sweep every 60 s (EventBridge), so a lookahead above it.
DEPLOYED_LOOKAHEAD = 65
# The Lambdas' own HOURGLASS_HANDOFF_SAFETY default (the stack does not set it).
DEPLOYED_HANDOFF_SAFETY = 30


# Callbacks answer with a JSON body, as a typical receiver does.
Receiver = CallbackReceiver


@dataclass(frozen=True)
class Stack:
    """One running Hourglass under test, whichever mode runs it."""

    mode: str
    api_url: str
    api_key: str
    endpoint_url: str
    outputs: dict[str, str]
    # A delay that makes ingest store a message rather than hand it off, so that a sweep hands it off.
    swept_delay: float
    # How long a swept message may take to arrive, sweep interval included.
    swept_timeout: float
    # The synthesized template the stack was deployed from.
    template: dict[str, Any]

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name="us-east-1")


@dataclass
class Client:
    base: str
    api_key: str | None = None

    def call(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None, api_key: str | None = None
    ) -> tuple[int, Any]:
        key = api_key if api_key is not None else self.api_key
        return api_call.call(self.base, method, path, body, api_key=key, raw=raw)


def start_inprocess() -> Iterator[Stack]:
    # Lambda runs as many dispatcher invocations as the timer queue needs; four pollers (each holds its
    # batch until its last timer is done) fall behind a paced burst on a loaded machine.
    with local_runtime(API_KEY, dispatcher_threads=12) as runtime:
        endpoint = runtime.config.endpoint_url
        assert endpoint is not None
        template = _template(cached_synth(runtime.config.cdk_context()))
        yield Stack("inprocess", runtime.api_url, API_KEY, endpoint, runtime.outputs, 8.0, 20.0, template)


def start_deployed() -> Iterator[Stack]:
    config = RuntimeConfig(
        emulator_port=free_port(), sweep_interval=60, lookahead=DEPLOYED_LOOKAHEAD, allow_private_callbacks=True
    )
    deployed = DeployedStack(config).start()
    try:
        stack = Stack(
            "deployed",
            deployed.api_url,
            deployed.api_key,
            deployed.endpoint_url,
            deployed.outputs,
            swept_delay=DEPLOYED_LOOKAHEAD + DEPLOYED_HANDOFF_SAFETY + 5,
            swept_timeout=DEPLOYED_LOOKAHEAD + DEPLOYED_HANDOFF_SAFETY + 5 + 30,
            template=_template(deployed.assembly),
        )
        warm_up(stack)
        yield stack
    finally:
        deployed.stop()


def _template(assembly: Path | None) -> dict[str, Any]:
    assert assembly is not None
    return dict(json.loads((assembly / "Hourglass.template.json").read_text()))


def warm_up(stack: Stack) -> None:
    """One message through ingest and the dispatcher: the first delivery does not pay the cold starts."""
    sqs = stack.client("sqs")
    # Named within the local stack's allowed SQS targets (devstack.config.LOCAL_SQS_TARGETS).
    target = sqs.create_queue(QueueName="target-warm-up")["QueueUrl"]
    api = Client(stack.api_url, stack.api_key)
    status, _ = api.call("PUT", "/v1/queues/warm-up", {"target": {"type": "sqs", "queue_url": target}})
    assert status == 201, status
    status, _ = api.call("POST", "/v1/queues/warm-up/messages", {"messages": [{"body": "warm", "delay": 0}]})
    assert status == 201, status
    deadline = time.time() + 60
    while time.time() < deadline:
        if sqs.receive_message(QueueUrl=target, WaitTimeSeconds=1).get("Messages"):
            return
    raise AssertionError("the deployed stack did not deliver a warm-up message within 60 s")


def _stack_scope(fixture_name: str, config: pytest.Config) -> Literal["module", "package"]:
    """In process, a stack per module: a runtime left running (a rate-limited backlog, 12 pollers) takes
    the CPU from the modules after it. Deployed, one for the package: `cdk deploy` takes a minute."""
    return "module" if MODES == ["inprocess"] else "package"


@pytest.fixture(scope=_stack_scope, params=MODES)
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    starters = {"inprocess": start_inprocess, "deployed": start_deployed}
    if request.param not in starters:
        raise ValueError(f"HOURGLASS_E2E_MODES: unknown mode {request.param!r} (known: {sorted(starters)})")
    yield from starters[request.param]()


@pytest.fixture(scope=_stack_scope)
def api(stack: Stack) -> Client:
    return Client(stack.api_url, stack.api_key)


@pytest.fixture(scope="package")
def receiver() -> Iterator[Receiver]:
    started = Receiver(reply=b'{"code": 100}').start()
    yield started
    started.stop()


def record_lateness(mode: str, seconds: float) -> None:
    LATENESS.setdefault(mode, []).append(seconds)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for mode, lateness in LATENESS.items():
        ordered = sorted(lateness)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        terminalreporter.write_line(
            f"e2e lateness ({mode}) over {len(ordered)} deliveries: p50 {statistics.median(ordered) * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms, min {ordered[0] * 1000:.0f} ms"
        )
