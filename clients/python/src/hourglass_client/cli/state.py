"""What every command shares: the configured client (and where its URL and key came from), the consoles,
`--output` / `--no-color`, and the command classes that turn any failure into one line and an exit status."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import click

from hourglass_client.cli.advice import next_step
from hourglass_client.client import Client
from hourglass_client.errors import HourglassError
from hourglass_client.terminal import PlainConsole, json_line, styled

OUTPUTS = ["table", "json", "jsonl"]
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
    # Which setting gave the URL and the key: "--url", "HOURGLASS_URL", "profile NAME" (None: not given).
    url_source: str | None = None
    key_source: str | None = None
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
                raise click.UsageError(f"{self.url_source or '--url'} {self.url!r} is not an http:// or https:// URL")
            try:
                self._client = Client(self.url, self.api_key, auth=self.auth or "api_key", region=self.region)
            except ValueError as exc:
                raise click.UsageError(f"{self.url_source or '--url'}: {exc}") from None
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

    def fail(self, exc: HourglassError) -> None:
        """An API error as one red line, and the next step when there is one."""
        self.err.print(styled(("error", "red"), f" {exc.label}: {exc.message}"))
        self.hint(exc)

    def hint(self, exc: HourglassError) -> None:
        """The next step after `exc`, when there is one."""
        step = next_step(exc, url=self.url, url_source=self.url_source, key_source=self.key_source)
        if step:
            self.err.print(styled(("hint", "yellow"), f" {step}"))


pass_state = click.make_pass_decorator(State)


def _set_output(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).output = value


def _set_no_color(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).color = False


def shared_options() -> list[click.Option]:
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
        self.params.extend(shared_options())


class Group(click.Group):
    """Every command with the shared options; API errors and any other failure as one red line (and the next
    step, when there is one) and exit status 1, never a traceback. Command lists show each whole first
    sentence, wrapped, never cut off."""

    command_class = Command
    group_class = type  # nested groups are Groups too

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HourglassError as exc:
            _state(ctx).fail(exc)
            ctx.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            ctx.exit(130)
        except Exception as exc:  # the CLI's last word: no traceback for any input
            _state(ctx).err.print(styled(("error", "red"), f" {exc}"))
            ctx.exit(1)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _state(ctx: click.Context) -> State:
    return ctx.find_object(State) or State()


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
