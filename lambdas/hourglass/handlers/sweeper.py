"""Sweeper Lambda: one sweep per EventBridge tick or fan-out invocation, stopping before the timeout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import cache
from typing import Any

from hourglass.adapters.fanout_invoker import FanoutInvoker
from hourglass.core import fanout
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import failure_notices, transitions
from hourglass.service.context import Context
from hourglass.service.operations import Operations
from hourglass.service.sweep import Invoke, Sweeper
from hourglass.settings import Settings


@cache
def _context() -> Context:
    return Context.from_settings(Settings.from_env())


@cache
def _invoker(function_name: str) -> FanoutInvoker:
    return FanoutInvoker(function_name)


def handle(ctx: Context, event: dict[str, Any] | None, context: Any, invoke: Invoke | None = None) -> dict[str, Any]:
    """`{"shards": [...], "until": ms, "run": id}` is a fan-out invocation, `{"operation": id, ...}` a
    bulk operation's; anything else a scheduled run."""

    def time_left() -> float:
        return context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0

    event = event or {}
    if "operation" in event:
        fanout_invoke = ctx.invoke_fanout or invoke or _self_invoke(ctx, context)
        try:
            return {"left": Operations(ctx, fanout_invoke).work(event, time_left)}
        finally:
            ctx.metrics.flush()
    if "shards" in event:
        part = fanout.parse_invocation(event, ctx.settings.shards)
        sweeper = Sweeper(ctx, shards=part.shards, until=part.until, run_id=part.run)
    else:
        sweeper = Sweeper(ctx, invoke=invoke or _self_invoke(ctx, context))
    try:
        report = asdict(sweeper.run(time_left))
        if "shards" not in event:
            fanout_invoke = ctx.invoke_fanout or invoke or _self_invoke(ctx, context)
            report["operations_restarted"] = _restart_operations(ctx, fanout_invoke, time_left)
            report["notices_recovered"] = _recover_notices(ctx, time_left)
            report["chains_repaired"] = _repair_chains(ctx, time_left)
        return report
    finally:
        ctx.metrics.flush()


def _restart_operations(ctx: Context, fanout_invoke: Invoke | None, time_left: Callable[[], float]) -> list[str]:
    """The scheduled run also restarts bulk operations whose worker died; a failure here never fails the sweep."""
    try:
        return Operations(ctx, fanout_invoke).restart_stale(time_left)
    except StoreError as exc:
        log("operation_restart_failed", error=str(exc))
        return []


def _recover_notices(ctx: Context, time_left: Callable[[], float]) -> int:
    """And sends the failure notices left in the outbox (a writer that died, a send that failed)."""
    try:
        return failure_notices.recover(ctx, time_left)
    except StoreError as exc:
        log("failure_notice_recovery_failed", error=str(exc))
        return 0


def _repair_chains(ctx: Context, time_left: Callable[[], float]) -> int:
    """And stores the next occurrence of schedules left without one (a chain that failed or a writer that died)."""
    try:
        return transitions.repair(ctx, time_left)
    except StoreError as exc:
        log("chain_repair_failed", error=str(exc))
        return 0


def _self_invoke(ctx: Context, context: Any) -> Invoke | None:
    """Fan-out invokes this same function: its name comes from the Lambda context (or the settings)."""
    name = ctx.settings.sweeper_function or getattr(context, "function_name", None)
    return _invoker(name).invoke if isinstance(name, str) and name else None


def handler(event: dict[str, Any] | None = None, context: Any = None) -> dict[str, Any]:
    return handle(_context(), event, context)
