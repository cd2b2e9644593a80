"""Shared fixtures: fake AWS credentials for every test, a fixed clock."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_ENDPOINT_URL", None)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told to; `sleep` moves it instead of waiting."""

    def __init__(self, start: datetime = NOW) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    yield FakeClock()


@pytest.fixture(scope="module", autouse=True)
def fresh_moto() -> Iterator[None]:
    """Each module starts on empty in-process AWS: a stack, sweep watermark or table of messages an
    earlier module left in moto's shared backends would change what this one sees, and how fast."""
    yield
    if "moto" in sys.modules:
        from tests.local_stack import reset_moto

        reset_moto()


# The local runtime's threads (devstack.pollers, devstack.gateway), loopback servers and embedded moto servers.
_RUNTIME_THREADS = ("poller-", "schedule", "invoke", "gateway", "loopback")
_EMBEDDED_MOTO = "(_server_entry)"  # what threading names ThreadedMotoServer's thread after its target
_first_seen: dict[threading.Thread, str] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Notes the test after which each local-runtime thread first ran, to name leaks at the end."""
    yield
    for thread in threading.enumerate():
        runtime = thread.name.startswith(_RUNTIME_THREADS) or thread.name.endswith(_EMBEDDED_MOTO)
        if runtime and thread not in _first_seen:
            _first_seen[thread] = item.nodeid


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Runtime threads alive after every fixture is torn down log into whatever runs next: name their tests."""
    leaks = sorted({f"{nodeid} ({thread.name})" for thread, nodeid in _first_seen.items() if thread.is_alive()})
    if leaks:
        terminalreporter.write_line(f"runtime threads still running, started during: {', '.join(leaks[:20])}")
