"""Options more than one command takes: targets, bodies, windows, and the queue settings' flags (derived from
`queue_settings.QueueSettings`, where each setting is declared once)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from hourglass_client import queue_settings, targets
from hourglass_client.windows import parse_window

F = TypeVar("F", bound=Callable[..., Any])

# One option per target type (`--target-<type> WHERE`): at most one may be given.
TARGET_OPTIONS: dict[str, tuple[str, Callable[[str], dict[str, Any]]]] = {
    "target_url": ("HTTP callback URL (POST)", targets.http),
    "target_sqs": ("SQS queue URL to deliver to", targets.sqs),
    "target_lambda": ("Lambda function ARN, invoked asynchronously", targets.lambda_function),
    "target_sns": ("SNS topic ARN to publish to", targets.sns_topic),
    "target_eventbridge": ("EventBridge event bus ARN to put events on", targets.event_bus),
    "target_sfn": ("Step Functions state machine ARN to start", targets.state_machine),
}


def apply(command: F, *decorators: Callable[[Any], Any]) -> F:
    """`command` with `decorators` applied so that their options are listed in the order given."""
    decorated: Any = command
    for decorator in reversed(decorators):
        decorated = decorator(decorated)
    return decorated  # type: ignore[no-any-return]


def target_options(command: F) -> F:
    """The `--target-*` options, `--header` for HTTP and the EventBridge event's source and detail type."""
    return apply(
        command,
        *(
            click.option(f"--{dest.replace('_', '-')}", dest, metavar="WHERE", help=help_text)
            for dest, (help_text, _) in TARGET_OPTIONS.items()
        ),
        click.option(
            "--header", "headers", multiple=True, metavar="NAME=VALUE", help="header for the HTTP target (repeatable)"
        ),
        click.option("--event-source", help="the EventBridge event's source (with --target-eventbridge)"),
        click.option("--event-detail-type", help="the EventBridge event's detail type (with --target-eventbridge)"),
    )


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


def window_option(spec: str | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    try:
        return parse_window(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from exc


class Parsed(click.ParamType):
    """A value read by one of the SDK's parsers (a ValueError is a usage error naming the flag)."""

    def __init__(self, parse: Callable[[str], Any], metavar: str) -> None:
        self.parse = parse
        self.name = metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


_CLICK_TYPES: dict[Any, click.ParamType] = {float: click.FLOAT, int: click.INT, str: click.STRING}


def _dest(setting: str, key: str | None) -> str:
    return f"setting__{setting}__{key or ''}"


def setting_options(command: F) -> F:
    """A flag for every queue setting that has one (`--rate-limit`, `--key-rate-limit`, `--breaker`, ...)."""
    return apply(
        command,
        *(
            click.option(
                f"--{flag.name}",
                _dest(setting, flag.key),
                type=_CLICK_TYPES.get(flag.kind) or Parsed(flag.kind, flag.metavar),
                metavar=flag.metavar,
                help=flag.help,
            )
            for setting, flag in queue_settings.flags()
        ),
    )


def chosen_settings(given: dict[str, Any]) -> dict[str, Any]:
    """The settings the `setting_options` in `given` set (popped from it), as `put_queue` arguments."""
    settings: dict[str, Any] = {}
    for setting, flag in queue_settings.flags():
        value = given.pop(_dest(setting, flag.key))
        if value is None:
            continue
        if flag.key is None:
            settings[setting] = value
        else:
            settings.setdefault(setting, {})[flag.key] = value
    return settings
