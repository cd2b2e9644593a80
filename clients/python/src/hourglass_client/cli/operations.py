"""`hourglass operations ...` and `hourglass purge`: bulk cancel, redeliver or shift of a queue's messages."""

from __future__ import annotations

import sys
import time

import click

from hourglass_client.cli.queues import STATUSES, pending_count
from hourglass_client.cli.state import Command, Group, State, pass_state
from hourglass_client.models import Operation

ACTIONS = ["cancel", "redeliver", "shift"]


@click.group(cls=Group)
def operations() -> None:
    """Bulk cancel, redeliver or shift a queue's messages."""


def operation_line(op: Operation) -> str:
    tail = f" error: {op.error}" if op.error else ""
    return f"{op.id} {op.action} {op.status}: matched {op.matched}, applied {op.applied}, skipped {op.skipped}{tail}"


def follow_operation(state: State, queue: str, op: Operation, poll: float) -> Operation:
    while not op.done:
        if not state.as_json:
            state.err.print(operation_line(op))
        time.sleep(poll)
        op = state.client.get_operation(queue, op.id)
    return op


@operations.command("start")
@click.argument("queue")
@click.argument("action", type=click.Choice(ACTIONS))
@click.option("--status", type=click.Choice(STATUSES), help="filter: status")
@click.option("--due-after", metavar="TIME", help="filter: due after this RFC 3339 time")
@click.option("--due-before", metavar="TIME", help="filter: due before this RFC 3339 time")
@click.option("--seconds", type=float, metavar="SECONDS", help="shift: seconds to move due times by (negative allowed)")
@click.option("--follow/--no-follow", default=False, help="poll until it finishes")
@click.option("--poll", type=float, default=1.0, show_default=True, metavar="SECONDS", help="seconds between polls")
@click.option("--yes", is_flag=True, help="do not ask before a bulk cancel")
@pass_state
def operations_start(
    state: State,
    queue: str,
    action: str,
    status: str | None,
    due_after: str | None,
    due_before: str | None,
    seconds: float | None,
    follow: bool,
    poll: float,
    yes: bool,
) -> None:
    """Start a bulk ACTION on QUEUE's messages matching the filter."""
    if action == "shift" and seconds is None:
        raise click.UsageError("shift needs --seconds")
    flt = {k: v for k, v in (("status", status), ("due_after", due_after), ("due_before", due_before)) if v}
    if action == "cancel":
        confirm_cancel(state, queue, flt, yes)
    op = state.client.start_operation(queue, action, filter=flt, seconds=seconds)
    if follow:
        op = follow_operation(state, queue, op, poll)
    state.emit(op.raw, lambda: state.out.print(operation_line(op)))
    if op.status == "failed":
        sys.exit(1)


def confirm_cancel(state: State, queue: str, flt: dict[str, str], yes: bool) -> None:
    """A bulk cancel says what it cancels (pending messages only, of the filter) and asks."""
    pending = pending_count(state.client, queue)
    scope = ", ".join(f"{k}={v}" for k, v in flt.items()) or "no filter"
    state.confirm(f"Cancels the pending messages of {queue} that match ({scope}): {pending} are pending now.", yes)


@click.command(cls=Command)
@click.argument("queue")
@click.option("--yes", is_flag=True, help="do not ask")
@click.option("--poll", type=float, default=1.0, show_default=True, metavar="SECONDS", help="seconds between polls")
@pass_state
def purge(state: State, queue: str, yes: bool, poll: float) -> None:
    """Cancel every pending message of QUEUE (a bulk cancel, followed to its end)."""
    confirm_cancel(state, queue, {"status": "pending"}, yes)
    op = state.client.start_operation(queue, "cancel", filter={"status": "pending"})
    op = follow_operation(state, queue, op, poll)
    state.emit(op.raw, lambda: state.out.print(operation_line(op)))
    if op.status == "failed":
        sys.exit(1)


@operations.command("get")
@click.argument("queue")
@click.argument("operation_id")
@click.option("--follow/--no-follow", default=False, help="poll until it finishes")
@click.option("--poll", type=float, default=1.0, show_default=True, metavar="SECONDS", help="seconds between polls")
@pass_state
def operations_get(state: State, queue: str, operation_id: str, follow: bool, poll: float) -> None:
    """Show (or --follow) a bulk operation."""
    op = state.client.get_operation(queue, operation_id)
    if follow:
        op = follow_operation(state, queue, op, poll)
    state.emit(op.raw, lambda: state.out.print(operation_line(op)))


# --- tail ---------------------------------------------------------------------------------------
