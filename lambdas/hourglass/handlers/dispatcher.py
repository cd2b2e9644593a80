"""Dispatcher Lambda: SQS timer records in, partial batch failures out."""

from __future__ import annotations

from datetime import timedelta
from functools import cache
from typing import Any

from hourglass.service import crash_switch
from hourglass.service.context import Context
from hourglass.service.dead_letters import DeadLetters
from hourglass.service.dispatch import Dispatcher
from hourglass.settings import Settings


@cache
def _dispatcher() -> Dispatcher:
    ctx = Context.from_settings(Settings.from_env())
    if ctx.settings.crash_at is not None:
        crash_switch.arm(ctx, ctx.settings.crash_at)
    return Dispatcher(ctx)


def record_pairs(event: dict[str, Any]) -> list[tuple[str, str]]:
    """(record id, body) of every SQS record of the event."""
    return [(str(r.get("messageId")), str(r.get("body", ""))) for r in event.get("Records", [])]


def receipts(event: dict[str, Any]) -> dict[str, str]:
    """Record id -> receipt handle, for the heartbeat that keeps the batch's records hidden."""
    records = event.get("Records", [])
    return {str(r.get("messageId")): str(r["receiptHandle"]) for r in records if r.get("receiptHandle")}


def receive_counts(event: dict[str, Any]) -> dict[str, int]:
    """Record id -> how many times SQS has handed it out (the error backoff doubles with it)."""
    return {str(r.get("messageId")): _receives(r) for r in event.get("Records", [])}


def _receives(record: dict[str, Any]) -> int:
    return int(record.get("attributes", {}).get("ApproximateReceiveCount", 1) or 1)


def dead_letter_records(event: dict[str, Any], dlq_url: str) -> list[tuple[str, str, int]]:
    """(record id, body, receive count) of the event's records that come from the timer DLQ."""
    name = dlq_url.rstrip("/").rsplit("/", 1)[-1]
    out = []
    for r in event.get("Records", []):
        if name and str(r.get("eventSourceARN", "")).rsplit(":", 1)[-1] == name:
            out.append((str(r.get("messageId")), str(r.get("body", "")), _receives(r)))
    return out


def handle(dispatcher: Dispatcher, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    deadline = None
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        remaining = timedelta(milliseconds=context.get_remaining_time_in_millis())
        deadline = dispatcher.ctx.clock() + remaining
    dead = dead_letter_records(event, dispatcher.ctx.settings.timer_dlq_url)
    try:
        if dead:
            # The timer DLQ drives this function too (one event source each; an event is one queue's).
            failed = DeadLetters(dispatcher.ctx).run_batch(dead)
        else:
            failed = dispatcher.run_batch(record_pairs(event), deadline, receipts(event), receive_counts(event))
    finally:
        dispatcher.ctx.metrics.flush()
    return {"batchItemFailures": [{"itemIdentifier": record_id} for record_id in failed]}


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return handle(_dispatcher(), event, context)
