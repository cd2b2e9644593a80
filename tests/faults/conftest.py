"""Fault injection: the integration harness wired through fault-injecting client proxies, and an HTTP emulator."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import FakeClock
from tests.faults.callback import Callback
from tests.faults.proxies import FaultyClient
from tests.integration.conftest import Harness, harness_for
from tests.local_stack import embedded_moto


@dataclass
class Faults:
    ddb: FaultyClient
    sqs: FaultyClient


@pytest.fixture
def faults(harness: Harness) -> Faults:
    """The harness's store and timer queue now talk to AWS through fault-injecting proxies."""
    ddb = FaultyClient(harness.ctx.store.client)
    sqs = FaultyClient(harness.ctx.timers.client)
    harness.ctx.store.client = ddb
    harness.ctx.timers.client = sqs
    return Faults(ddb=ddb, sqs=sqs)


@pytest.fixture
def callback() -> Iterator[Callback]:
    """A loopback HTTP target that records what it receives."""
    started = Callback().start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """An AWS emulator over HTTP on loopback, shared by a module's tests that need a real endpoint."""
    with embedded_moto() as endpoint:
        yield endpoint


@pytest.fixture
def harness(clock: FakeClock) -> Iterator[Harness]:
    with harness_for(clock) as started:
        yield started


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in getattr(sys.modules.get("tests.faults.test_total_queue"), "REPORTS", []):
        terminalreporter.write_line(line)
