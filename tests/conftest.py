"""Shared fixtures: fake AWS credentials for every test, a fixed clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

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
