"""`hourglass send | list | get | patch | cancel | redeliver | deliver-now | attempts`: one queue's messages."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hourglass_client import files
from hourglass_client.cli.options import parse_body, window_option
from hourglass_client.cli.queues import STATUSES
from hourglass_client.cli.state import Command, State, pass_state
from hourglass_client.cli.text import short, time_text
from hourglass_client.errors import HourglassError
from hourglass_client.models import Attempt, Created, Message
from hourglass_client.terminal import styled
from hourglass_client.windows import WINDOW_HELP

# "any": no order asked (the stack's own, unspecified), for a stack that keeps neither list index.
ORDERS = ["due", "created", "any"]


@click.command(cls=Command)
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--body-text", metavar="TEXT", help="send this text as the body (BODY is JSON)")
@click.option(
    "--delay", type=float, metavar="SECONDS", help="deliver this many seconds from now [default: the queue's]"
)
@click.option("--deliver-at", metavar="TIME", help="deliver at this RFC 3339 time (or local time with --timezone)")
@click.option("--timezone", metavar="ZONE", help="IANA zone, such as Europe/Paris, for a --deliver-at without offset")
@click.option(
    "--ttl", type=float, metavar="SECONDS", help="expire this many seconds after creation [default: the queue's]"
)
@click.option("--dedup-id", metavar="ID", help="a second send with the same id within 24 h stores nothing new")
@click.option(
    "--flow-key", metavar="KEY", help="the key whose flow_control limits the message shares (e.g. a tenant id)"
)
@click.option("--priority", type=click.IntRange(0, 9), help="0-9, 9 first when limits hold messages back [default 5]")
@click.option("--window", "window_spec", metavar="SPEC", help=WINDOW_HELP + " (replaces the queue's)")
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON-Lines or CSV file of messages: checked whole, then sent; a re-run stores no row twice",
)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), help="file format [default: by suffix]")
@pass_state
def send(
    state: State,
    queue: str,
    body: str | None,
    body_text: str | None,
    delay: float | None,
    deliver_at: str | None,
    timezone: str | None,
    ttl: float | None,
    dedup_id: str | None,
    flow_key: str | None,
    priority: int | None,
    window_spec: str | None,
    file: Path | None,
    fmt: str | None,
) -> None:
    """Schedule a message with BODY (JSON) or --body-text, or every message of --file."""
    if file is not None:
        send_file(state, queue, file, fmt)
        return
    if body is None and body_text is None:
        raise click.UsageError("give a BODY, --body-text or --file")
    created = state.client.send(
        queue,
        parse_body(body, body_text),
        delay=delay,
        deliver_at=deliver_at,
        timezone=timezone,
        ttl=ttl,
        dedup_id=dedup_id,
        window=window_option(window_spec),
        flow_key=flow_key,
        priority=priority,
    )
    note = "  (already stored: same dedup id)" if created.duplicate else ""
    state.emit(created.raw, lambda: state.out.print(f"{created.id}  due {time_text(created.due_at)}{note}"))


def send_file(state: State, queue: str, file: Path, fmt: str | None) -> None:
    """Every row of `file`, in requests with a progress bar; says how many were new and how many stored before."""
    rows = files.read(file, fmt)
    stored: list[Created] = []
    try:
        with Progress(
            TextColumn("sending"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=state.err,
            disable=state.as_json,
        ) as progress:
            task = progress.add_task("send", total=len(rows))
            for answered in state.client.send_batches(queue, [row.entry for row in rows]):
                stored.extend(answered)
                progress.update(task, completed=len(stored))
                for one in answered if state.as_json else ():
                    state.echo_json(one.raw)  # streamed as they are stored: one per line in json too
    except HourglassError as exc:
        state.err.print(styled(("error", "red"), " ", files.refusal(file, rows, len(stored), exc)))
        state.err.print(files.progress_note(rows, len(stored), exc))
        state.hint(exc)
        sys.exit(1)
    if not state.as_json:
        before = sum(one.duplicate for one in stored)
        state.out.print(f"sent {len(stored)} messages to {queue}: {before} already stored, {len(stored) - before} new")


def message_table(found: Iterable[Message]) -> Table:
    """One row per message; a `blocked by` column when one of them waits behind another of its key (v1.3)."""
    found = list(found)
    blocked = any(m.blocked_by for m in found)
    columns = ["id", "status", "due at", "next attempt", "key", "prio", "attempts", "last error", "body"]
    table = Table(*columns, *(["blocked by"] if blocked else []))
    for m in found:
        table.add_row(
            m.id,
            m.status,
            time_text(m.due_at),
            time_text(m.next_attempt_at),
            m.flow_key or "",
            str(m.priority),
            str(m.attempts),
            short(m.last_error or ""),
            short(m.body),
            *([m.blocked_by or ""] if blocked else []),
        )
    return table


@click.command("get", cls=Command)
@click.argument("queue")
@click.argument("message_id")
@pass_state
def get_message(state: State, queue: str, message_id: str) -> None:
    """Show one message."""
    m = state.client.get_message(queue, message_id)

    def human() -> None:
        table = Table("field", "value", show_header=False)
        for key, value in m.raw.items():
            table.add_row(key, "" if value is None else value if isinstance(value, str) else json.dumps(value))
        state.out.print(table)

    state.emit(m.raw, human)


@click.command("list", cls=Command)
@click.argument("queue")
@click.option("--status", type=click.Choice(STATUSES), help="only messages in this status")
@click.option("--schedule", metavar="NAME", help="only occurrences of this schedule")
@click.option("--flow-key", metavar="KEY", help="only messages of this flow key")
@click.option("--limit", type=int, default=50, show_default=True, metavar="N", help="how many to show (0: all)")
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default="due",
    show_default=True,
    help="due: earliest due first; created: oldest first; any: unordered (a stack without the list indexes)",
)
@pass_state
def list_messages(
    state: State,
    queue: str,
    status: str | None,
    schedule: str | None,
    flow_key: str | None,
    limit: int,
    order: str,
) -> None:
    """List a queue's messages, following next_cursor up to --limit."""
    asked = click.get_current_context().get_parameter_source("order") is not click.core.ParameterSource.DEFAULT
    try:
        found = _listed(state, queue, status, schedule, flow_key, limit, order)
    except HourglassError as exc:
        # The default order on a stack deployed without its index (`hourglass:order_due` false): unordered.
        if asked or exc.status != 400 or not exc.message.startswith("order:"):
            raise
        state.err.print(f"{exc.message}: listing unordered (--order any)")
        found = _listed(state, queue, status, schedule, flow_key, limit, "any")
    state.emit_list([m.raw for m in found], lambda: state.out.print(message_table(found)))


def _listed(
    state: State, queue: str, status: str | None, schedule: str | None, flow_key: str | None, limit: int, order: str
) -> list[Message]:
    found: list[Message] = []
    size = min(limit or 1000, 1000)
    pages = state.client.iter_messages(
        queue,
        status=status,
        schedule=schedule,
        page_size=size,
        order=None if order == "any" else order,
        flow_key=flow_key,
    )
    for m in pages:
        found.append(m)
        if limit and len(found) >= limit:
            break
    return found


@click.command(cls=Command)
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@pass_state
def cancel(state: State, queue: str, message_ids: tuple[str, ...]) -> None:
    """Cancel pending messages."""
    for message_id in message_ids:
        state.client.cancel(queue, message_id)
    docs = [{"cancelled": message_id} for message_id in message_ids]
    state.emit_list(docs, lambda: state.lines(f"cancelled {message_id}" for message_id in message_ids))


@click.command(cls=Command)
@click.argument("queue")
@click.argument("message_id")
@click.option("--body", metavar="JSON", help="new body (JSON)")
@click.option("--body-text", metavar="TEXT", help="new body, this text")
@click.option("--delay", type=float, metavar="SECONDS", help="deliver this many seconds from now")
@click.option("--deliver-at", metavar="TIME", help="deliver at this RFC 3339 time")
@pass_state
def patch(
    state: State,
    queue: str,
    message_id: str,
    body: str | None,
    body_text: str | None,
    delay: float | None,
    deliver_at: str | None,
) -> None:
    """Edit or reschedule a pending message."""
    value = parse_body(body, body_text, "--body")
    m = state.client.patch(queue, message_id, body=value, delay=delay, deliver_at=deliver_at)
    state.emit(m.raw, lambda: state.out.print(message_table([m])))


@click.command(cls=Command)
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@click.option("--delay", type=float, metavar="SECONDS", help="deliver this many seconds from now [default: now]")
@pass_state
def redeliver(state: State, queue: str, message_ids: tuple[str, ...], delay: float | None) -> None:
    """Deliver failed, expired or delivered messages again."""
    done = [state.client.redeliver(queue, message_id, delay=delay) for message_id in message_ids]
    state.emit_list([m.raw for m in done], lambda: state.lines(due_line(m) for m in done))


def due_line(m: Message) -> str:
    return f"{m.id} {m.status}, due {time_text(m.due_at)}"


@click.command("deliver-now", cls=Command)
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@pass_state
def deliver_now(state: State, queue: str, message_ids: tuple[str, ...]) -> None:
    """Make pending messages due now (as PATCH --delay 0)."""
    done = [state.client.deliver_now(queue, message_id) for message_id in message_ids]
    state.emit_list([m.raw for m in done], lambda: state.lines(due_line(m) for m in done))


def attempt_table(found: Iterable[Attempt]) -> Table:
    table = Table("#", "started", "finished", "outcome", "status", "error", "retry at")
    for a in found:
        code = "" if a.status_code is None else str(a.status_code)
        table.add_row(
            str(a.attempt),
            time_text(a.started_at),
            time_text(a.finished_at),
            a.outcome,
            code,
            a.error or "",
            time_text(a.retry_at),
        )
    return table


@click.command(cls=Command)
@click.argument("queue")
@click.argument("message_id")
@pass_state
def attempts(state: State, queue: str, message_id: str) -> None:
    """Show a message's attempt history."""
    found = state.client.attempts(queue, message_id)
    state.emit_list([a.raw for a in found], lambda: state.out.print(attempt_table(found)))


COMMANDS = (send, get_message, list_messages, cancel, patch, redeliver, deliver_now, attempts)
