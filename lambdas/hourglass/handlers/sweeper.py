"""Sweeper Lambda: one sweep per EventBridge tick, stopping before the Lambda timeout."""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

from hourglass.service.context import Context
from hourglass.service.sweep import Sweeper
from hourglass.settings import Settings


@cache
def _context() -> Context:
    return Context.from_settings(Settings.from_env())


def handle(ctx: Context, event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0

    shards = (event or {}).get("shards")
    return asdict(Sweeper(ctx, shards=shards).run(time_left))


def handler(event: dict[str, Any] | None = None, context: Any = None) -> dict[str, Any]:
    return handle(_context(), event, context)
