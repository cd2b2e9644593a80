"""End-to-end fixtures: the stack in each mode under test, a loopback receiver.

HOURGLASS_E2E_MODES (comma-separated) picks the modes: "inprocess" (the handlers in this process on a
moto_server; the default) and "deployed" (`cdk deploy` into MiniStack, the Lambdas running there).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.emulator import free_port, port_is_free, prepare_embedded_moto
from devstack.runtime import Runtime, cached_synth

MODES = [mode.strip() for mode in os.environ.get("HOURGLASS_E2E_MODES", "inprocess").split(",") if mode.strip()]
LATENESS: dict[str, list[float]] = {}
API_KEY = "e2e-api-key"
# The deployed mode's Lambda timeout-free margin: a sweep every 60 s (EventBridge), so a lookahead above it.
DEPLOYED_LOOKAHEAD = 65
# The Lambdas' own HOURGLASS_HANDOFF_SAFETY default (the stack does not set it).
DEPLOYED_HANDOFF_SAFETY = 30


@dataclass
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    """A loopback HTTP callback server; `script[path]` lists the statuses to answer, then 200."""

    received: list[Received] = field(default_factory=list)
    script: dict[str, list[int]] = field(default_factory=dict)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.received.append(Received(time.time(), self.path, dict(self.headers), body))
                statuses = receiver.script.get(self.path) or []
                status = statuses.pop(0) if statuses else 200
                payload = b'{"code": 100}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, path: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = [r for r in self.received if r.path == path]
            if len(got) >= count:
                return got
            time.sleep(0.05)
        return [r for r in self.received if r.path == path]


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
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        key = api_key if api_key is not None else self.api_key
        if key:
            request.add_header("x-api-key", key)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None


def start_inprocess() -> Iterator[Stack]:
    prepare_embedded_moto()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    assert not port_is_free(port)
    endpoint = f"http://127.0.0.1:{port}"
    config = RuntimeConfig(
        api_port=0,
        endpoint_url=endpoint,
        sweep_interval=1.0,
        lookahead=4.0,
        handoff_safety=1.0,
        allow_private_callbacks=True,
        api_key=API_KEY,
        # Lambda runs as many dispatcher invocations as the timer queue needs; four pollers (each holds
        # its batch until its last timer is done) fall behind a paced burst on a loaded machine.
        dispatcher_workers=12,
    )
    runtime = Runtime(config).start()
    try:
        template = _template(cached_synth(config.cdk_context()))
        yield Stack("inprocess", runtime.api_url, API_KEY, endpoint, runtime.outputs, 8.0, 20.0, template)
    finally:
        runtime.stop()
        server.stop()


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
    target = sqs.create_queue(QueueName="e2e-warm-up")["QueueUrl"]
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


@pytest.fixture(scope="session", params=MODES)
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    starters = {"inprocess": start_inprocess, "deployed": start_deployed}
    if request.param not in starters:
        raise ValueError(f"HOURGLASS_E2E_MODES: unknown mode {request.param!r} (known: {sorted(starters)})")
    yield from starters[request.param]()


@pytest.fixture(scope="session")
def api(stack: Stack) -> Client:
    return Client(stack.api_url, stack.api_key)


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    assert started.server is not None
    started.server.shutdown()


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
