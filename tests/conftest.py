"""Shared fixtures: fake AWS credentials for every test, a fixed clock."""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_ENDPOINT_URL", None)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)

# Every botocore session parses the JSON models of the services it makes clients for (~0.1 s each), and
# moto's mock_aws starts a new default session each time it starts (every harness): one loader for the
# run reads each model once, which makes a harness 3-6 times cheaper. Models do not change during a run.
botocore.session.create_loader = functools.cache(botocore.session.create_loader)


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
# Threads seen running in a later module than the one that started them: a package's fixture, or a leak.
_crossed: set[threading.Thread] = set()
_leaks: set[str] = set()


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _package(nodeid: str) -> str:
    return _module(nodeid).rsplit("/", 1)[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Names, at the end, each local-runtime thread that ran on into a later module and ended before its
    package did (no fixture of its module stopped it) or outlived its package (no fixture is wider)."""
    _note_runtime_threads(item.nodeid, package_ended=False)
    yield
    package_ended = nextitem is None or _package(nextitem.nodeid) != _package(item.nodeid)
    for thread in threading.enumerate():
        if thread.name.startswith(_RUNTIME_THREADS) or thread.name.endswith(_EMBEDDED_MOTO):
            _first_seen.setdefault(thread, item.nodeid)
    _note_runtime_threads(item.nodeid, package_ended)


def _note_runtime_threads(nodeid: str, package_ended: bool) -> None:
    for thread, started in list(_first_seen.items()):
        if not thread.is_alive():
            if thread in _crossed and not package_ended and _package(started) == _package(nodeid):
                _leaks.add(f"{started} ({thread.name})")
            del _first_seen[thread]
            _crossed.discard(thread)
            continue
        if _module(started) != _module(nodeid):
            _crossed.add(thread)
        if _package(started) != _package(nodeid):
            _leaks.add(f"{started} ({thread.name})")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Runtime threads that outlive their fixture log into (and take the CPU from) whatever runs next."""
    alive = {f"{nodeid} ({thread.name})" for thread, nodeid in _first_seen.items() if thread.is_alive()}
    leaks = sorted(alive | _leaks)
    if leaks:
        terminalreporter.write_line(f"runtime threads still running, started during: {', '.join(leaks[:20])}")
