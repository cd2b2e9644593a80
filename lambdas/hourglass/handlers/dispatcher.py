"""Dispatcher Lambda: SQS timer records in, partial batch failures out."""

from __future__ import annotations

from functools import cache
from typing import Any

from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.settings import Settings


@cache
def _dispatcher() -> Dispatcher:
    return Dispatcher(Context.from_settings(Settings.from_env()))


def record_pairs(event: dict[str, Any]) -> list[tuple[str, str]]:
    """(record id, body) of every SQS record of the event."""
    return [(str(r.get("messageId")), str(r.get("body", ""))) for r in event.get("Records", [])]


def handle(dispatcher: Dispatcher, event: dict[str, Any]) -> dict[str, Any]:
    try:
        failed = dispatcher.run_batch(record_pairs(event))
    finally:
        dispatcher.ctx.metrics.flush()
    return {"batchItemFailures": [{"itemIdentifier": record_id} for record_id in failed]}


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return handle(_dispatcher(), event)
