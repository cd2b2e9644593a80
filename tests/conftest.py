"""Shared fixtures: fake AWS credentials for every test, a fixed clock."""

from __future__ import annotations

import os
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


_RUNTIME_THREADS = ("poller-", "schedule", "invoke")
_leaks: list[str] = []


def _runtime_threads() -> set[int]:
    return {t.ident or 0 for t in threading.enumerate() if t.name.startswith(_RUNTIME_THREADS) and t.is_alive()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Notes a test after which a local runtime's threads are still running: they log into later tests."""
    before = _runtime_threads()
    yield
    if _runtime_threads() - before:
        _leaks.append(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _leaks:
        terminalreporter.write_line(f"runtime threads left running after: {', '.join(_leaks[:20])}")
