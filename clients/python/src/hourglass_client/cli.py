"""The `hourglass` command: queues, messages, schedules, bulk operations and `tail`, over the SDK.

Config: a profile of `~/.config/hourglass/config.toml` (`--profile`, HOURGLASS_PROFILE), overridden by
HOURGLASS_URL / HOURGLASS_API_KEY / HOURGLASS_AUTH and by --url / --api-key / --auth (iam signs requests with
AWS SigV4 from the standard credential chain). `--output table|json|jsonl` in every command.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click
from click.shell_completion import get_completion_class
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from hourglass_client import files, profiles, targets
from hourglass_client.client import Client, breaker
from hourglass_client.errors import HourglassError
from hourglass_client.models import Attempt, Created, Message, Operation, Queue, Schedule
from hourglass_client.terminal import PlainConsole, json_line, styled
from hourglass_client.version import __version__
from hourglass_client.windows import parse_window

F = TypeVar("F", bound=Callable[..., Any])
STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"]
ACTIONS = ["cancel", "redeliver", "shift"]
OUTPUTS = ["table", "json", "jsonl"]
ORDERS = ["due", "created"]
SHELLS = ["bash", "zsh", "fish"]
# A table written to a pipe or file is as wide as its content, never cut at a terminal's 80 columns.
PIPE_WIDTH = 4096


@dataclass
class State:
    url: str | None = None
    api_key: str | None = None
    auth: str | None = None
    region: str | None = None
    output: str = "table"
    color: bool = True
    _client: Client | None = None
    _out: PlainConsole | None = None
    _err: PlainConsole | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            if not self.url:
                raise click.UsageError("set HOURGLASS_URL, pass --url, or add a url to a --profile")
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise click.UsageError(f"--url {self.url!r} is not an http:// or https:// URL")
            try:
                self._client = Client(self.url, self.api_key, auth=self.auth or "api_key", region=self.region)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
        return self._client

    @property
    def as_json(self) -> bool:
        return self.output != "table"

    @property
    def out(self) -> PlainConsole:
        if self._out is None:
            self._out = self._console(stderr=False)
        return self._out

    @property
    def err(self) -> PlainConsole:
        if self._err is None:
            self._err = self._console(stderr=True)
        return self._err

    def _console(self, *, stderr: bool) -> PlainConsole:
        stream = sys.stderr if stderr else sys.stdout
        width = None if stream.isatty() else PIPE_WIDTH
        # --no-color or NO_COLOR (https://no-color.org): no escape codes at all, bold included.
        plain = not self.color or bool(os.environ.get("NO_COLOR"))
        if plain:
            return PlainConsole(stderr=stderr, width=width, color_system=None)
        return PlainConsole(stderr=stderr, width=width)

    def emit(self, doc: Any, human: Callable[[], None]) -> None:
        """One document: the table (or line) for people, else the document as one line of JSON."""
        if self.as_json:
            self.echo_json(doc)
        else:
            human()

    def emit_list(self, docs: list[Any], human: Callable[[], None]) -> None:
        """A list: a table, one JSON array (`json`) or one document per line (`jsonl`)."""
        if self.output == "json":
            self.echo_json(docs)
        elif self.output == "jsonl":
            for doc in docs:
                self.echo_json(doc)
        else:
            human()

    def echo_json(self, doc: Any) -> None:
        click.echo(json_line(doc))

    def lines(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.out.print(text)

    def confirm(self, what: str, yes: bool) -> None:
        """Says what a destructive command will affect, and asks (unless `yes`)."""
        self.err.print(what)
        if not yes:
            click.confirm("Go ahead?", abort=True, err=True)


pass_state = click.make_pass_decorator(State)


def _set_output(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).output = value


def _set_no_color(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).color = False


def _shared_options() -> list[click.Option]:
    """`-o/--output` and `--no-color`, accepted by the top command and by every command under it."""
    return [
        click.Option(
            ["-o", "--output"],
            type=click.Choice(OUTPUTS),
            expose_value=False,
            callback=_set_output,
            help="table (default), json (one document; lists as one array) or jsonl (one document per line)",
        ),
        click.Option(
            ["--no-color"], is_flag=True, expose_value=False, callback=_set_no_color, help="no colours (or NO_COLOR=1)"
        ),
    ]


class Command(click.Command):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_shared_options())


class Group(click.Group):
    """Every command with the shared options; API errors and any other failure as one red line and exit
    status 1, never a traceback."""

    command_class = Command
    group_class = type  # nested groups are Groups too

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HourglassError as exc:
            _errors(ctx).print(styled(("error", "red"), f" {exc.label}: {exc.message}"))
            ctx.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            ctx.exit(130)
        except Exception as exc:  # the CLI's last word: no traceback for any input
            _errors(ctx).print(styled(("error", "red"), f" {exc}"))
            ctx.exit(1)


def _errors(ctx: click.Context) -> PlainConsole:
    state = ctx.find_object(State)
    return state.err if state is not None else PlainConsole(stderr=True)


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


COMPLETION_HELP = """\b
Shell completion (bash, zsh or fish):
  bash: eval "$(hourglass completion bash)"     (in ~/.bashrc)
  zsh:  eval "$(hourglass completion zsh)"      (in ~/.zshrc)
  fish: hourglass completion fish > ~/.config/fish/completions/hourglass.fish

\b
Profiles (~/.config/hourglass/config.toml; HOURGLASS_CONFIG names another file):
  [default]
  url = "http://127.0.0.1:8080"
  key = "..."
  [prod]
  url = "https://....execute-api.eu-west-1.amazonaws.com/prod"
  auth = "api_key"
"""


def _version() -> str:
    return __version__


@click.group(cls=Group, epilog=COMPLETION_HELP)
@click.version_option(_version(), "--version", prog_name="hourglass", message="%(prog)s %(version)s")
@click.option("--profile", envvar="HOURGLASS_PROFILE", help="profile of the config file [env HOURGLASS_PROFILE]")
@click.option("--url", envvar="HOURGLASS_URL", help="API base URL [env HOURGLASS_URL]")
@click.option("--api-key", envvar="HOURGLASS_API_KEY", help="x-api-key value [env HOURGLASS_API_KEY]")
@click.option(
    "--auth",
    type=click.Choice(["api_key", "iam"]),
    envvar="HOURGLASS_AUTH",
    help="iam: sign requests with AWS SigV4 (standard credential chain) [env HOURGLASS_AUTH]",
)
@click.option("--region", help="region for --auth iam [default: the URL's, then the AWS configuration's]")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as --output jsonl")
@click.pass_context
def main(
    ctx: click.Context,
    profile: str | None,
    url: str | None,
    api_key: str | None,
    auth: str | None,
    region: str | None,
    as_json: bool,
) -> None:
    """Hourglass delay queue: manage queues, schedule and inspect messages."""
    try:
        chosen = profiles.load(profile or None)
    except profiles.ProfileError as exc:
        raise click.UsageError(str(exc)) from exc
    state = ctx.ensure_object(State)
    state.url, state.api_key, state.auth = url or chosen.url, api_key or chosen.key, auth or chosen.auth
    state.region = region
    if as_json and state.output == "table":
        state.output = "jsonl"


# One option per target type (`--target-<type> WHERE`): at most one may be given.
TARGET_OPTIONS: dict[str, tuple[str, Callable[[str], dict[str, Any]]]] = {
    "target_url": ("HTTP callback URL", targets.http),
    "target_sqs": ("SQS queue URL to deliver to", targets.sqs),
    "target_lambda": ("Lambda function ARN, invoked asynchronously", targets.lambda_function),
    "target_sns": ("SNS topic ARN to publish to", targets.sns_topic),
    "target_eventbridge": ("EventBridge event bus ARN to put events on", targets.event_bus),
    "target_sfn": ("Step Functions state machine ARN to start", targets.state_machine),
}

# The field of each target type that says where it delivers (the queue table's "target" column).
TARGET_FIELDS = ("url", "queue_url", "function_arn", "topic_arn", "event_bus_arn", "state_machine_arn")


def target_options(command: F) -> F:
    """The `--target-*` options, `--header` for HTTP and the EventBridge event's source and detail type."""
    decorated: Any = command
    extras = (
        click.option("--header", "headers", multiple=True, help="NAME=VALUE header for the HTTP target (repeatable)"),
        click.option("--event-source", help="the EventBridge event's source (with --target-eventbridge)"),
        click.option("--event-detail-type", help="the EventBridge event's detail type (with --target-eventbridge)"),
    )
    for extra in reversed(extras):
        decorated = extra(decorated)
    for dest, (help_text, _) in reversed(TARGET_OPTIONS.items()):
        decorated = click.option(f"--{dest.replace('_', '-')}", dest, help=help_text)(decorated)
    return decorated  # type: ignore[no-any-return]


def chosen_target(given: dict[str, Any]) -> dict[str, Any] | None:
    """The target the `target_options` in `given` name (popped from it), or None when none is given."""
    wheres = {dest: given.pop(dest) for dest in TARGET_OPTIONS}
    headers, source, detail_type = given.pop("headers"), given.pop("event_source"), given.pop("event_detail_type")
    named = [dest for dest, where in wheres.items() if where]
    if len(named) > 1:
        raise click.UsageError(" and ".join(f"--{d.replace('_', '-')}" for d in named) + " are mutually exclusive")
    if not named:
        return None
    [dest] = named
    if dest == "target_url":
        return targets.http(wheres[dest], dict(h.split("=", 1) for h in headers if "=" in h))
    if dest == "target_eventbridge":
        return targets.event_bus(wheres[dest], source=source, detail_type=detail_type)
    return TARGET_OPTIONS[dest][1](wheres[dest])


for _option in _shared_options():
    main.params.append(_option)


@main.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (see `hourglass --help` for where it goes)."""
    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(main, {}, "hourglass", "_HOURGLASS_COMPLETE").source())


def parse_body(text: str | None, as_text: str | None, flag: str = "BODY") -> Any:
    """A body given as JSON (a mistyped one is an error, never a string), or as text with --body-text."""
    if text is not None and as_text is not None:
        raise click.UsageError(f"give {flag} or --body-text, not both")
    if as_text is not None:
        return as_text
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.UsageError(f"{flag} is not valid JSON ({exc}); send text on purpose with --body-text") from exc


# --- queues -------------------------------------------------------------------------------------


WINDOW_HELP = "delivery window: '09:00-18:00 mon-fri Europe/Paris except=2026-12-25' or a JSON object"


def window_option(spec: str | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    try:
        return parse_window(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from exc


def breaker_option(spec: str | None) -> dict[str, Any] | None:
    """`--breaker RATIO,MIN_ATTEMPTS,WINDOW`, such as `0.5,20,300`; the server checks the ranges."""
    if spec is None:
        return None
    try:
        ratio, attempts, seconds = (part.strip() for part in spec.split(","))
        return breaker(float(ratio), int(attempts), int(seconds))
    except ValueError as exc:
        raise click.BadParameter("give RATIO,MIN_ATTEMPTS,WINDOW such as 0.5,20,300", param_hint="--breaker") from exc


def paused_text(q: Queue) -> str:
    if not q.paused:
        return "no"
    return f"yes ({q.paused_reason})" if q.paused_reason else "yes"


@main.group()
def queues() -> None:
    """Create, inspect, pause and delete queues."""


def queue_table(found: Iterable[Queue]) -> Table:
    table = Table("name", "target", "default delay", "ttl", "retry", "limits", "paused")
    for q in found:
        target = q.target or {}
        where = next((str(target[f]) for f in TARGET_FIELDS if target.get(f)), "")
        retry = q.retry
        retry_text = (
            f"{retry.get('max_attempts', '')}x {retry.get('backoff_base', '')}..{retry.get('backoff_max', '')}s"
        )
        limits = ", ".join(
            f"{k}={q.raw[k]}" for k in ("rate_limit", "max_concurrency", "timeout") if q.raw.get(k) is not None
        )
        ttl = "" if q.ttl is None else str(q.ttl)
        table.add_row(q.name, where, str(q.default_delay), ttl, retry_text, limits, paused_text(q))
    return table


@queues.command("put")
@click.argument("name")
@target_options
@click.option("--default-delay", type=float)
@click.option("--max-delay", type=float)
@click.option("--ttl", type=float)
@click.option("--max-attempts", type=int)
@click.option("--backoff-base", type=float)
@click.option("--backoff-max", type=float)
@click.option("--signing-secret")
@click.option("--signing-secret-next", help="the secret a rotation moves to (both sign while it is set)")
@click.option("--rate-limit", type=float)
@click.option("--max-concurrency", type=int)
@click.option("--timeout", type=float)
@click.option("--window", "window_spec", help=WINDOW_HELP)
@click.option(
    "--breaker",
    "breaker_spec",
    metavar="RATIO,MIN_ATTEMPTS,WINDOW",
    help="circuit breaker: pause the queue once MIN_ATTEMPTS attempts ended within WINDOW seconds and RATIO of "
    "them failed (such as 0.5,20,300)",
)
@click.option("--settings", "settings_json", help="extra settings as a JSON object (merged last)")
@pass_state
def queues_put(
    state: State,
    name: str,
    default_delay: float | None,
    max_delay: float | None,
    ttl: float | None,
    max_attempts: int | None,
    backoff_base: float | None,
    backoff_max: float | None,
    signing_secret: str | None,
    signing_secret_next: str | None,
    rate_limit: float | None,
    max_concurrency: int | None,
    timeout: float | None,
    window_spec: str | None,
    breaker_spec: str | None,
    settings_json: str | None,
    **target_given: Any,
) -> None:
    """Create or replace queue NAME."""
    target = chosen_target(target_given)
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
        signing_secret_next=signing_secret_next,
        rate_limit=rate_limit,
        max_concurrency=max_concurrency,
        timeout=timeout,
        window=window_option(window_spec),
        circuit_breaker=breaker_option(breaker_spec),
        settings=settings,
    )
    state.emit(q.raw, lambda: state.out.print(queue_table([q])))


@queues.command("get")
@click.argument("name")
@pass_state
def queues_get(state: State, name: str) -> None:
    """Show queue NAME and how many of its messages are in each status."""
    q = state.client.get_queue(name)
    counts = q.counts or status_counts(state.client, name)  # a server before v1.2 has no counts
    if state.as_json:
        state.echo_json({**q.raw, "counts": counts})
        return
    state.out.print(queue_table([q]))
    state.out.print(Text("  ").join(styled(f"{s}: ", (str(n), "bold")) for s, n in counts.items()))


def status_counts(client: Client, queue: str, cap: int = 10_000, statuses: Iterable[str] = STATUSES) -> dict[str, int]:
    """Messages per status, counted by listing (at most `cap` each): for servers without `counts`."""
    counts = {}
    for status in statuses:
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
    state.emit_list([q.raw for q in found], lambda: state.out.print(queue_table(found)))


@queues.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="do not ask")
@pass_state
def queues_delete(state: State, name: str, yes: bool) -> None:
    """Delete queue NAME (its pending messages are cancelled, its schedules removed)."""
    q = state.client.get_queue(name)
    pending = (q.counts or status_counts(state.client, name, statuses=("pending",))).get("pending", 0)
    state.confirm(f"Deleting queue {name} cancels its {pending} pending messages and removes its schedules.", yes)
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
@click.option("--body-text", help="send this text as the body (BODY is JSON)")
@click.option("--delay", type=float, help="seconds from now")
@click.option("--deliver-at", help="RFC 3339 time (or local time with --timezone)")
@click.option("--timezone", help="IANA zone for a --deliver-at without offset")
@click.option("--ttl", type=float)
@click.option("--dedup-id")
@click.option("--flow-key", help="the key whose flow_control limits the message shares (e.g. a tenant id)")
@click.option("--priority", type=click.IntRange(0, 9), help="0-9, 9 first when limits hold messages back")
@click.option("--window", "window_spec", help=WINDOW_HELP + " (replaces the queue's)")
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
    if file is None:
        if body is None and body_text is None:
            raise click.UsageError("give a BODY, --body-text or --file")
        value = parse_body(body, body_text)
        created = state.client.send(
            queue,
            value,
            delay=delay,
            deliver_at=deliver_at,
            timezone=timezone,
            ttl=ttl,
            dedup_id=dedup_id,
            window=window_option(window_spec),
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
                    state.echo_json(one.raw)  # streamed as they are stored: one per line in json too
    except HourglassError as exc:
        state.err.print(styled(("error", "red"), " ", files.refusal(file, rows, len(stored), exc)))
        state.err.print(files.progress_note(rows, len(stored), exc))
        sys.exit(1)
    if not state.as_json:
        duplicates = sum(one.duplicate for one in stored)
        state.out.print(f"sent {len(stored)} messages to {queue} ({duplicates} duplicates)")


def message_table(found: Iterable[Message]) -> Table:
    table = Table("id", "status", "due at", "next attempt", "key", "prio", "attempts", "last error", "body")
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
        )
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
@click.option("--order", type=click.Choice(ORDERS), help="due: earliest due first; created: oldest first")
@pass_state
def list_messages(
    state: State,
    queue: str,
    status: str | None,
    schedule: str | None,
    flow_key: str | None,
    limit: int,
    order: str | None,
) -> None:
    """List a queue's messages, following next_cursor up to --limit."""
    found: list[Message] = []
    size = min(limit or 1000, 1000)
    pages = state.client.iter_messages(
        queue, status=status, schedule=schedule, page_size=size, order=order, flow_key=flow_key
    )
    for m in pages:
        found.append(m)
        if limit and len(found) >= limit:
            break
    state.emit_list([m.raw for m in found], lambda: state.out.print(message_table(found)))


@main.command()
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@pass_state
def cancel(state: State, queue: str, message_ids: tuple[str, ...]) -> None:
    """Cancel pending messages."""
    for message_id in message_ids:
        state.client.cancel(queue, message_id)
    docs = [{"cancelled": message_id} for message_id in message_ids]
    state.emit_list(docs, lambda: state.lines(f"cancelled {message_id}" for message_id in message_ids))


@main.command()
@click.argument("queue")
@click.argument("message_id")
@click.option("--body", help="new body (JSON)")
@click.option("--body-text", help="new body, this text")
@click.option("--delay", type=float)
@click.option("--deliver-at")
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


@main.command()
@click.argument("queue")
@click.argument("message_ids", nargs=-1, required=True)
@click.option("--delay", type=float, help="seconds from now (default: now)")
@pass_state
def redeliver(state: State, queue: str, message_ids: tuple[str, ...], delay: float | None) -> None:
    """Deliver failed, expired or delivered messages again."""
    done = [state.client.redeliver(queue, message_id, delay=delay) for message_id in message_ids]
    state.emit_list([m.raw for m in done], lambda: state.lines(due_line(m) for m in done))


def due_line(m: Message) -> str:
    return f"{m.id} {m.status}, due {time_text(m.due_at)}"


@main.command("deliver-now")
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


@main.command()
@click.argument("queue")
@click.argument("message_id")
@pass_state
def attempts(state: State, queue: str, message_id: str) -> None:
    """A message's attempt history."""
    found = state.client.attempts(queue, message_id)
    state.emit_list([a.raw for a in found], lambda: state.out.print(attempt_table(found)))


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
@click.option("--body", help="body of each occurrence (JSON)")
@click.option("--body-text", help="body of each occurrence, this text")
@target_options
@click.option("--start-at")
@click.option("--end-at")
@click.option("--window", "window_spec", help=WINDOW_HELP + " (for its occurrences)")
@click.option(
    "--catch-up",
    type=click.Choice(["skip", "latest", "all"]),
    help="occurrences missed while paused or down: none run (default), only the latest, or all in order",
)
@click.option("--jitter", type=int, metavar="SECONDS", help="delay each occurrence by up to SECONDS (0-3600)")
@pass_state
def schedules_put(
    state: State,
    queue: str,
    name: str,
    cron: str | None,
    every: float | None,
    timezone: str | None,
    body: str | None,
    body_text: str | None,
    start_at: str | None,
    end_at: str | None,
    window_spec: str | None,
    catch_up: str | None,
    jitter: int | None,
    **target_given: Any,
) -> None:
    """Create or replace schedule NAME of QUEUE (a `--target-*` overrides the queue's target)."""
    problems = schedule_problems(cron, every, timezone, body, body_text, start_at, end_at)
    if problems:
        raise click.UsageError("the schedule is not valid:\n" + "\n".join(f"  {p}" for p in problems))
    s = state.client.put_schedule(
        queue,
        name,
        cron=cron,
        every=every,
        timezone=timezone,
        body=parse_body(body, body_text, "--body"),
        target=chosen_target(target_given),
        start_at=start_at,
        end_at=end_at,
        window=window_option(window_spec),
        catch_up=catch_up,
        jitter=jitter,
    )
    state.emit(s.raw, lambda: state.out.print(schedule_table([s])))


def schedule_problems(
    cron: str | None,
    every: float | None,
    timezone: str | None,
    body: str | None,
    body_text: str | None,
    start_at: str | None,
    end_at: str | None,
) -> list[str]:
    """Every bad field of a `schedules put` the CLI can see before asking the server (which names only one)."""
    problems = []
    if (cron is None) == (every is None):
        problems.append("--cron / --every: give exactly one")
    if every is not None and every < 60:
        problems.append("--every: must be at least 60 seconds")
    if body is None and body_text is None:
        problems.append("--body: is required (JSON; or --body-text)")
    elif body is not None and body_text is not None:
        problems.append("--body / --body-text: give one")
    elif body is not None:
        try:
            json.loads(body)
        except ValueError as exc:
            problems.append(f"--body: is not valid JSON ({exc}); send text with --body-text")
    if timezone is not None and not known_zone(timezone):
        problems.append(f"--timezone: {timezone!r} is not an IANA time zone")
    for flag, value in (("--start-at", start_at), ("--end-at", end_at)):
        if value is not None and not rfc3339(value):
            problems.append(f"{flag}: {value!r} is not an RFC 3339 time")
    return problems


def known_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def rfc3339(text: str) -> bool:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return parsed.tzinfo is not None


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
    state.emit_list([s.raw for s in found], lambda: state.out.print(schedule_table(found)))


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
    "Pause a schedule (occurrences missed while paused run as its catch_up says).",
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
    q = state.client.get_queue(queue)
    pending = (q.counts or status_counts(state.client, queue, statuses=("pending",))).get("pending", 0)
    scope = ", ".join(f"{k}={v}" for k, v in flt.items()) or "no filter"
    state.confirm(f"Cancels the pending messages of {queue} that match ({scope}): {pending} are pending now.", yes)


@main.command()
@click.argument("queue")
@click.option("--yes", is_flag=True, help="do not ask")
@click.option("--poll", type=float, default=1.0, show_default=True)
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
    if not state.as_json:  # events stream one per line in json and jsonl alike
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
