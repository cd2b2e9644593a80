"""Dispatcher Lambda: SQS timer records in, partial batch failures out."""

from __future__ import annotations

from functools import cache
from typing import Any

from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher, record_pairs
from hourglass.settings import Settings


@cache
def _dispatcher() -> Dispatcher:
    return Dispatcher(Context.from_settings(Settings.from_env()))


def handle(dispatcher: Dispatcher, event: dict[str, Any]) -> dict[str, Any]:
    try:
        failed = dispatcher.run_batch(record_pairs(event))
    finally:
        dispatcher.ctx.metrics.flush()
    return {"batchItemFailures": [{"itemIdentifier": record_id} for record_id in failed]}


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return handle(_dispatcher(), event)
