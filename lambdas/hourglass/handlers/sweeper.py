"""Sweeper Lambda: one sweep per EventBridge tick or fan-out worker event, stopping before the timeout."""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

from hourglass.adapters.worker_invoker import WorkerInvoker
from hourglass.core import fanout
from hourglass.service.context import Context
from hourglass.service.operations import Operations
from hourglass.service.sweep import Invoke, Sweeper
from hourglass.settings import Settings


@cache
def _context() -> Context:
    return Context.from_settings(Settings.from_env())


@cache
def _invoker(function_name: str) -> WorkerInvoker:
    return WorkerInvoker(function_name)


def handle(ctx: Context, event: dict[str, Any] | None, context: Any, invoke: Invoke | None = None) -> dict[str, Any]:
    """`{"shards": [...], "until": ms, "run": id}` is a fan-out worker, `{"operation": id, ...}` a bulk
    operation's worker; anything else a scheduled run."""

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0

    event = event or {}
    if "operation" in event:
        worker_invoke = ctx.invoke_worker or invoke or _self_invoke(ctx, context)
        try:
            return {"left": Operations(ctx, worker_invoke).work(event, time_left)}
        finally:
            ctx.metrics.flush()
    if "shards" in event:
        worker = fanout.parse_worker(event, ctx.settings.shards)
        sweeper = Sweeper(ctx, shards=worker.shards, until=worker.until, run_id=worker.run)
    else:
        sweeper = Sweeper(ctx, invoke=invoke or _self_invoke(ctx, context))
    try:
        return asdict(sweeper.run(time_left))
    finally:
        ctx.metrics.flush()


def _self_invoke(ctx: Context, context: Any) -> Invoke | None:
    """Workers are this same function: its name comes from the Lambda context (or the settings)."""
    name = ctx.settings.sweeper_function or getattr(context, "function_name", None)
    return _invoker(name).invoke if isinstance(name, str) and name else None


def handler(event: dict[str, Any] | None = None, context: Any = None) -> dict[str, Any]:
    return handle(_context(), event, context)
