"""The `hourglass` command: queues, messages, schedules, bulk operations and `tail`, over the SDK.

Config from HOURGLASS_URL / HOURGLASS_API_KEY (or --url / --api-key); --json prints raw documents.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from hourglass_client import files
from hourglass_client.client import Client
from hourglass_client.errors import HourglassError
from hourglass_client.files import parse_value
from hourglass_client.models import Attempt, Created, Message, Operation, Queue, Schedule
from hourglass_client.terminal import PlainConsole, json_line, styled

F = TypeVar("F", bound=Callable[..., Any])
STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"]
ACTIONS = ["cancel", "redeliver", "shift"]


@dataclass
class State:
    url: str | None
    api_key: str | None
    as_json: bool
    out: PlainConsole
    err: PlainConsole
    _client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            if not self.url:
                raise click.UsageError("set HOURGLASS_URL or pass --url")
            self._client = Client(self.url, self.api_key)
        return self._client

    def emit(self, doc: Any, human: Callable[[], None]) -> None:
        if self.as_json:
            self.echo_json(doc)
        else:
            human()

    def echo_json(self, doc: Any) -> None:
        click.echo(json_line(doc))


pass_state = click.make_pass_decorator(State)


class Group(click.Group):
    """Turns API errors into one red line and exit status 1 instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HourglassError as exc:
            PlainConsole(stderr=True).print(styled(("error", "red"), f" {exc.label}: {exc.message}"))
            ctx.exit(1)


def add_switch(
    group: click.Group, verb: str, help_text: str, noun: str, call: Callable[..., Any], *arguments: str
) -> None:
    """`<group> <verb> ARGUMENTS...` (pause, resume): `call(client, *arguments)`, then "<noun> NAME <verb>d"."""

    def command(state: State, **given: str) -> None:
        done = call(state.client, *(given[name] for name in arguments))
        state.emit(done.raw, lambda: state.out.print(f"{noun} {given['name']} {verb}d"))

    decorated = pass_state(command)
    for name in reversed(arguments):
        decorated = click.argument(name)(decorated)
    group.command(verb, help=help_text)(decorated)


def time_text(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


@click.group(cls=Group)
@click.option("--url", envvar="HOURGLASS_URL", help="API base URL [env HOURGLASS_URL]")
@click.option("--api-key", envvar="HOURGLASS_API_KEY", help="x-api-key value [env HOURGLASS_API_KEY]")
@click.option("--json", "as_json", is_flag=True, help="print JSON documents (one per line) for scripts")
@click.pass_context
def main(ctx: click.Context, url: str | None, api_key: str | None, as_json: bool) -> None:
    """Hourglass delay queue: manage queues, schedule and inspect messages."""
    ctx.obj = State(url, api_key, as_json, PlainConsole(), PlainConsole(stderr=True))


# --- queues -------------------------------------------------------------------------------------


@main.group()
def queues() -> None:
    """Create, inspect, pause and delete queues."""


def queue_table(found: Iterable[Queue]) -> Table:
    table = Table("name", "target", "default delay", "ttl", "retry", "limits", "paused")
    for q in found:
        target = q.target or {}
        where = target.get("url") or target.get("queue_url") or ""
        retry = q.retry
        retry_text = (
            f"{retry.get('max_attempts', '')}x {retry.get('backoff_base', '')}..{retry.get('backoff_max', '')}s"
        )
        limits = ", ".join(
            f"{k}={q.raw[k]}" for k in ("rate_limit", "max_concurrency", "timeout") if q.raw.get(k) is not None
        )
        ttl = "" if q.ttl is None else str(q.ttl)
        table.add_row(q.name, where, str(q.default_delay), ttl, retry_text, limits, "yes" if q.paused else "no")
    return table


@queues.command("put")
@click.argument("name")
@click.option("--target-url", help="HTTP callback URL")
@click.option("--target-sqs", help="SQS queue URL to deliver to")
@click.option("--header", "headers", multiple=True, help="NAME=VALUE header for the HTTP target (repeatable)")
@click.option("--default-delay", type=float)
@click.option("--max-delay", type=float)
@click.option("--ttl", type=float)
@click.option("--max-attempts", type=int)
@click.option("--backoff-base", type=float)
@click.option("--backoff-max", type=float)
@click.option("--signing-secret")
@click.option("--rate-limit", type=float)
@click.option("--max-concurrency", type=int)
@click.option("--timeout", type=float)
@click.option("--settings", "settings_json", help="extra settings as a JSON object (merged last)")
@pass_state
def queues_put(
    state: State,
    name: str,
    target_url: str | None,
    target_sqs: str | None,
    headers: tuple[str, ...],
    default_delay: float | None,
    max_delay: float | None,
    ttl: float | None,
    max_attempts: int | None,
    backoff_base: float | None,
    backoff_max: float | None,
    signing_secret: str | None,
    rate_limit: float | None,
    max_concurrency: int | None,
    timeout: float | None,
    settings_json: str | None,
) -> None:
    """Create or replace queue NAME."""
    if target_url and target_sqs:
        raise click.UsageError("--target-url and --target-sqs are mutually exclusive")
    target: dict[str, Any] | None = None
    if target_url:
        target = {"type": "http", "url": target_url}
        if headers:
            target["headers"] = dict(h.split("=", 1) for h in headers if "=" in h)
    elif target_sqs:
        target = {"type": "sqs", "queue_url": target_sqs}
    retry = {
        k: v
        for k, v in (("max_attempts", max_attempts), ("backoff_base", backoff_base), ("backoff_max", backoff_max))
        if v is not None
    }
    settings = json.loads(settings_json) if settings_json else None
    if settings is not None and not isinstance(settings, dict):
        raise click.UsageError("--settings must be a JSON object")
    q = state.client.put_queue(
        name,
        default_delay=default_delay,
        max_delay=max_delay,
        ttl=ttl,
        target=target,
        retry=retry or None,
        signing_secret=signing_secret,
        rate_limit=rate_limit,
        max_concurrency=max_concurrency,
        timeout=timeout,
        settings=settings,
    )
    state.emit(q.raw, lambda: state.out.print(queue_table([q])))


@queues.command("get")
@click.argument("name")
@pass_state
def queues_get(state: State, name: str) -> None:
    """Show queue NAME and how many of its messages are in each status."""
    q = state.client.get_queue(name)
    counts = status_counts(state.client, name)
    if state.as_json:
        state.echo_json({**q.raw, "counts": counts})
        return
    state.out.print(queue_table([q]))
    state.out.print(Text("  ").join(styled(f"{s}: ", (str(n), "bold")) for s, n in counts.items()))


def status_counts(client: Client, queue: str, cap: int = 10_000) -> dict[str, int]:
    """Messages per status, counted by listing (at most `cap` each)."""
    counts = {}
    for status in STATUSES:
        n = 0
        for _ in client.iter_messages(queue, status=status, page_size=1000):
            n += 1
            if n >= cap:
                break
        counts[status] = n
    return counts


@queues.command("list")
@pass_state
def queues_list(state: State) -> None:
    """List every queue, in name order."""
    found = list(state.client.iter_queues())
    state.emit([q.raw for q in found], lambda: state.out.print(queue_table(found)))


@queues.command("delete")
@click.argument("name")
@pass_state
def queues_delete(state: State, name: str) -> None:
    """Delete queue NAME (its pending messages are cancelled)."""
    state.client.delete_queue(name)
    state.emit({"deleted": name}, lambda: state.out.print(f"deleted queue {name}"))


add_switch(
    queues, "pause", "Pause queue NAME: no attempt starts until it is resumed.", "queue", Client.pause_queue, "name"
)
add_switch(
    queues,
    "resume",
    "Resume queue NAME: what fell due meanwhile is delivered in due order.",
    "queue",
    Client.resume_queue,
    "name",
)


# --- messages -----------------------------------------------------------------------------------


@main.command()
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--delay", type=float, help="seconds from now")
@click.option("--deliver-at", help="RFC 3339 time (or local time with --timezone)")
@click.option("--timezone", help="IANA zone for a --deliver-at without offset")
@click.option("--ttl", type=float)
@click.option("--dedup-id")
@click.option("--flow-key", help="the key whose flow_control limits the message shares (e.g. a tenant id)")
@click.option("--priority", type=click.IntRange(0, 9), help="0-9, 9 first when limits hold messages back")
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON-Lines or CSV file of messages: checked whole, then sent; a re-run stores no row twice",
)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), help="file format (default: by suffix)")
@pass_state
def send(
    state: State,
    queue: str,
    body: str | None,
    delay: float | None,
    deliver_at: str | None,
    timezone: str | None,
    ttl: float | None,
    dedup_id: str | None,
    flow_key: str | None,
    priority: int | None,
    file: Path | None,
    fmt: str | None,
) -> None:
    """Schedule a message with BODY (JSON or text), or every message of --file."""
    if file is None:
        if body is None:
            raise click.UsageError("give a BODY or --file")
        created = state.client.send(
            queue,
            parse_value(body),
            delay=delay,
            deliver_at=deliver_at,
            timezone=timezone,
            ttl=ttl,
            dedup_id=dedup_id,
            flow_key=flow_key,
            priority=priority,
        )
        state.emit(
            created.raw,
            lambda: state.out.print(
                f"{created.id}  due {time_text(created.due_at)}{'  (duplicate)' if created.duplicate else ''}"
            ),
        )
        return
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
                    state.echo_json(one.raw)
    except HourglassError as exc:
        state.err.print(styled(("error", "red"), " ", files.refusal(file, rows, len(stored), exc)))
        state.err.print(files.progress_note(rows, len(stored), exc))
        sys.exit(1)
    if not state.as_json:
        duplicates = sum(one.duplicate for one in stored)
        state.out.print(f"sent {len(stored)} messages to {queue} ({duplicates} duplicates)")


def message_table(found: Iterable[Message]) -> Table:
    table = Table("id", "status", "due at", "key", "prio", "attempts", "last error", "body")
    for m in found:
        row = (m.id, m.status, time_text(m.due_at), m.flow_key or "", str(m.priority), str(m.attempts))
        table.add_row(*row, short(m.last_error or ""), short(m.body))
    return table


@main.command("get")
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


@main.command("list")
@click.argument("queue")
@click.option("--status", type=click.Choice(STATUSES))
@click.option("--schedule", help="only occurrences of this schedule")
@click.option("--flow-key", help="only messages of this flow key")
@click.option("--limit", type=int, default=50, show_default=True, help="how many to show (0: all)")
@pass_state
def list_messages(
    state: State, queue: str, status: str | None, schedule: str | None, flow_key: str | None, limit: int
) -> None:
    """List a queue's messages, following next_cursor up to --limit."""
    found: list[Message] = []
    pages = state.client.iter_messages(
        queue, status=status, schedule=schedule, page_size=min(limit or 1000, 1000), flow_key=flow_key
    )
    for m in pages:
        found.append(m)
        if limit and len(found) >= limit:
            break
    if state.as_json:
        for m in found:
            state.echo_json(m.raw)
    else:
        state.out.print(message_table(found))


@main.command()
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@pass_state
def cancel(state: State, queue: str, message_ids: tuple[str, ...]) -> None:
    """Cancel pending messages."""
    for message_id in message_ids:
        state.client.cancel(queue, message_id)
        if state.as_json:
            state.echo_json({"cancelled": message_id})
        else:
            state.out.print(f"cancelled {message_id}")


@main.command()
@click.argument("queue")
@click.argument("message_id")
@click.option("--body", help="new body (JSON or text)")
@click.option("--delay", type=float)
@click.option("--deliver-at")
@pass_state
def patch(
    state: State, queue: str, message_id: str, body: str | None, delay: float | None, deliver_at: str | None
) -> None:
    """Edit or reschedule a pending message."""
    m = state.client.patch(
        queue, message_id, body=None if body is None else parse_value(body), delay=delay, deliver_at=deliver_at
    )
    state.emit(m.raw, lambda: state.out.print(message_table([m])))


@main.command()
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@click.option("--delay", type=float, help="seconds from now (default: now)")
@pass_state
def redeliver(state: State, queue: str, message_ids: tuple[str, ...], delay: float | None) -> None:
    """Deliver failed, expired or delivered messages again."""
    for message_id in message_ids:
        m = state.client.redeliver(queue, message_id, delay=delay)
        if state.as_json:
            state.echo_json(m.raw)
        else:
            state.out.print(f"{m.id} {m.status}, due {time_text(m.due_at)}")


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


@main.command()
@click.argument("queue")
@click.argument("message_id")
@pass_state
def attempts(state: State, queue: str, message_id: str) -> None:
    """A message's attempt history."""
    found = state.client.attempts(queue, message_id)
    state.emit([a.raw for a in found], lambda: state.out.print(attempt_table(found)))


# --- schedules ----------------------------------------------------------------------------------


@main.group()
def schedules() -> None:
    """Recurring schedules of a queue."""


def schedule_table(found: Iterable[Schedule]) -> Table:
    table = Table("name", "when", "timezone", "paused", "next occurrences", "body")
    for s in found:
        when = s.cron if s.cron else f"every {s.every}s"
        upcoming = ", ".join(time_text(t) for t in s.next_due_at)
        table.add_row(s.name, when, s.timezone, "yes" if s.paused else "no", upcoming, short(s.body, 30))
    return table


@schedules.command("put")
@click.argument("queue")
@click.argument("name")
@click.option("--cron", help="five-field cron expression")
@click.option("--every", type=float, help="seconds between occurrences (>= 60)")
@click.option("--timezone", help="IANA zone (default UTC)")
@click.option("--body", help="body of each occurrence (JSON or text)")
@click.option("--target-url", help="HTTP target overriding the queue's")
@click.option("--start-at")
@click.option("--end-at")
@pass_state
def schedules_put(
    state: State,
    queue: str,
    name: str,
    cron: str | None,
    every: float | None,
    timezone: str | None,
    body: str | None,
    target_url: str | None,
    start_at: str | None,
    end_at: str | None,
) -> None:
    """Create or replace schedule NAME of QUEUE."""
    if (cron is None) == (every is None):
        raise click.UsageError("give exactly one of --cron and --every")
    s = state.client.put_schedule(
        queue,
        name,
        cron=cron,
        every=every,
        timezone=timezone,
        body=None if body is None else parse_value(body),
        target={"type": "http", "url": target_url} if target_url else None,
        start_at=start_at,
        end_at=end_at,
    )
    state.emit(s.raw, lambda: state.out.print(schedule_table([s])))


@schedules.command("get")
@click.argument("queue")
@click.argument("name")
@pass_state
def schedules_get(state: State, queue: str, name: str) -> None:
    """Show one schedule with its next occurrences."""
    s = state.client.get_schedule(queue, name)
    state.emit(s.raw, lambda: state.out.print(schedule_table([s])))


@schedules.command("list")
@click.argument("queue")
@pass_state
def schedules_list(state: State, queue: str) -> None:
    """List a queue's schedules."""
    found = list(state.client.iter_schedules(queue))
    state.emit([s.raw for s in found], lambda: state.out.print(schedule_table(found)))


@schedules.command("delete")
@click.argument("queue")
@click.argument("name")
@pass_state
def schedules_delete(state: State, queue: str, name: str) -> None:
    """Delete a schedule (its pending occurrence is cancelled)."""
    state.client.delete_schedule(queue, name)
    state.emit({"deleted": name}, lambda: state.out.print(f"deleted schedule {name}"))


add_switch(
    schedules,
    "pause",
    "Pause a schedule (occurrences while paused are skipped).",
    "schedule",
    Client.pause_schedule,
    "queue",
    "name",
)
add_switch(schedules, "resume", "Resume a schedule.", "schedule", Client.resume_schedule, "queue", "name")


# --- bulk operations ----------------------------------------------------------------------------


@main.group()
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
@click.option("--due-after", help="filter: due after this RFC 3339 time")
@click.option("--due-before", help="filter: due before this RFC 3339 time")
@click.option("--seconds", type=float, help="shift: seconds to move due times by (negative allowed)")
@click.option("--follow/--no-follow", default=False, help="poll until it finishes")
@click.option("--poll", type=float, default=1.0, show_default=True)
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
) -> None:
    """Start a bulk ACTION on QUEUE's messages matching the filter."""
    if action == "shift" and seconds is None:
        raise click.UsageError("shift needs --seconds")
    flt = {k: v for k, v in (("status", status), ("due_after", due_after), ("due_before", due_before)) if v}
    op = state.client.start_operation(queue, action, filter=flt, seconds=seconds)
    if follow:
        op = follow_operation(state, queue, op, poll)
    state.emit(op.raw, lambda: state.out.print(operation_line(op)))
    if op.status == "failed":
        sys.exit(1)


@operations.command("get")
@click.argument("queue")
@click.argument("operation_id")
@click.option("--follow/--no-follow", default=False, help="poll until it finishes")
@click.option("--poll", type=float, default=1.0, show_default=True)
@pass_state
def operations_get(state: State, queue: str, operation_id: str, follow: bool, poll: float) -> None:
    """Show (or --follow) a bulk operation."""
    op = state.client.get_operation(queue, operation_id)
    if follow:
        op = follow_operation(state, queue, op, poll)
    state.emit(op.raw, lambda: state.out.print(operation_line(op)))


# --- tail ---------------------------------------------------------------------------------------

WATCHED = ("delivered", "failed", "expired", "pending")


def snapshot(client: Client, queue: str) -> dict[str, Message]:
    """The queue's messages that finished or are waiting for a retry, by id."""
    seen: dict[str, Message] = {}
    for status in WATCHED:
        for m in client.iter_messages(queue, status=status, page_size=1000):
            if status != "pending" or m.attempts > 0:
                seen[m.id] = m
    return seen


def changes(before: dict[str, Message], after: dict[str, Message]) -> list[Message]:
    """Messages whose status or attempt count moved since `before`, oldest change first."""
    moved = [
        m
        for mid, m in after.items()
        if mid not in before or (before[mid].status, before[mid].attempts) != (m.status, m.attempts)
    ]
    return sorted(moved, key=lambda m: (m.delivered_at or m.due_at or datetime.min.replace(tzinfo=UTC), m.id))


def event_of(m: Message) -> str:
    return {"pending": "retrying"}.get(m.status, m.status)


@main.command()
@click.argument("queue")
@click.option("--interval", type=float, default=1.0, show_default=True, help="seconds between polls")
@click.option("--count", type=int, default=0, help="stop after this many events (0: run until Ctrl-C)")
@click.option("--timeout", type=float, default=0, help="stop after this many seconds (0: never)")
@click.option("--all", "show_all", is_flag=True, help="also print what already happened before the start")
@pass_state
def tail(state: State, queue: str, interval: float, count: int, timeout: float, show_all: bool) -> None:
    """Follow QUEUE's deliveries, retries and failures live."""
    client = state.client
    client.get_queue(queue)
    seen: dict[str, Message] = {} if show_all else snapshot(client, queue)
    printed = 0
    deadline = time.monotonic() + timeout if timeout else None
    if not state.as_json:
        state.err.print(f"tailing {queue} (Ctrl-C to stop)")
    try:
        while True:
            current = snapshot(client, queue)
            for m in changes(seen, current):
                if state.as_json:
                    state.echo_json({"event": event_of(m), **m.raw})
                else:
                    colour = {"delivered": "green", "failed": "red", "expired": "yellow"}.get(m.status, "cyan")
                    error = f"  {m.last_error}" if m.last_error and m.status != "delivered" else ""
                    when = time_text(m.delivered_at or m.due_at)
                    state.out.print(
                        styled(f"{when}  ", (f"{event_of(m):9}", colour), f"  {m.id}  attempt {m.attempts}{error}")
                    )
                printed += 1
                if count and printed >= count:
                    return
            seen = current
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


if __name__ == "__main__":
    main()
