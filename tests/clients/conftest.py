"""Client fixtures: the local runtime behind an API key, an SDK client, a raw-body callback receiver."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner, Result
from hourglass_client import Client, Message, ordering
from hourglass_client.cli import main

from devstack.runtime import Runtime
from tests.local_stack import local_runtime
from tests.loopback import CallbackReceiver, QuietHandler, base_url, serve, shut

API_KEY = "client-tests-key"
T = TypeVar("T")
# Fake APIs `scripted` started during the running test: `stop_scripted` shuts them after it.
_SCRIPTED: list[Scripted] = []


# The SDK tests read each callback's raw body (`Received.raw`).
RawReceiver = CallbackReceiver


def eventually(probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Polls `probe` until it returns something truthy (the runtime delivers in real time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.1)


@pytest.fixture(scope="package")
def client_runtime() -> Iterator[Runtime]:
    """One runtime for the package, stopped after its last test (not left polling under later suites)."""
    with local_runtime(API_KEY) as started:
        yield started


@pytest.fixture(scope="package")
def api_url(client_runtime: Runtime) -> str:
    return client_runtime.api_url


@pytest.fixture
def client(api_url: str) -> Client:
    # A 100-message create is 100 dedup transactions on the embedded emulator: on a starved shared
    # machine one request took over the default 30 s, and each retry after a timeout starts over.
    return Client(api_url, API_KEY, timeout=120)


@pytest.fixture(scope="package")
def receiver() -> Iterator[RawReceiver]:
    started = RawReceiver().start()
    yield started
    started.stop()


@pytest.fixture
def queue(client: Client, receiver: RawReceiver) -> str:
    """A fresh queue delivering to its own path on the receiver."""
    name = f"q-{uuid.uuid4().hex[:10]}"
    client.put_queue(
        name,
        target={"type": "http", "url": receiver.url(f"/{name}")},
        retry={"max_attempts": 2, "backoff_base": 0.2, "backoff_max": 1},
    )
    return name


@dataclass(frozen=True)
class HeldKey:
    """An ordered queue (`on_failure: "hold"`) whose key `flow_key` is held by its `failed` message, with
    `waiting` due behind it."""

    queue: str
    flow_key: str
    failed: str
    waiting: str


def hold_a_key(client: Client, receiver: RawReceiver, flow_key: str) -> HeldKey:
    """A fresh ordered queue, its first message of `flow_key` failed (its one attempt answered 500), and a second
    due message of that key waiting behind it while the key is held."""
    name = f"ord-{uuid.uuid4().hex[:8]}"
    target = {"type": "http", "url": receiver.url(f"/{name}")}
    receiver.script[f"/{name}"] = [500]
    client.put_queue(name, target=target, retry={"max_attempts": 1}, ordering=ordering("hold"))
    failed = client.send(name, {"n": 1}, flow_key=flow_key)
    eventually(lambda: client.get_message(name, failed.id).status == "failed")
    waiting = client.send(name, {"n": 2}, flow_key=flow_key)
    eventually(lambda: blocked(client.get_message(name, waiting.id)) and client.key(name, flow_key).waiting)
    return HeldKey(name, flow_key, failed.id, waiting.id)


def blocked(message: Message) -> bool:
    return message.status == "pending" and message.blocked_by is not None


@dataclass
class Scripted:
    """A fake API answering each request with the next (status, headers, body) of `answers`."""

    answers: list[tuple[int, dict[str, str], Any]]
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Scripted:
        fake = self

        class Handler(QuietHandler):
            def _answer(self) -> None:
                raw = self.body()
                fake.requests.append((self.command, self.path, json.loads(raw) if raw else None))
                status, headers, body = fake.answers.pop(0)
                self.answer(status, json.dumps(body).encode(), headers)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

        self.server = serve(Handler)
        return self

    @property
    def url(self) -> str:
        return base_url(self.server)


def scripted(*answers: tuple[int, dict[str, str], Any]) -> Scripted:
    fake = Scripted(list(answers)).start()
    _SCRIPTED.append(fake)
    return fake


@pytest.fixture(autouse=True)
def stop_scripted() -> Iterator[None]:
    yield
    while _SCRIPTED:
        server = _SCRIPTED.pop().server
        assert server is not None
        shut(server)


@pytest.fixture
def run(api_url: str) -> Any:
    # A wide terminal, so Rich does not wrap the lines the tests read.
    runner = CliRunner(env={"HOURGLASS_URL": api_url, "HOURGLASS_API_KEY": API_KEY, "COLUMNS": "250"})

    def invoke(*args: str) -> Result:
        return runner.invoke(main, list(args), catch_exceptions=False)

    return invoke
