"""`hourglass schedules ...`: a queue's recurring schedules."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import click
from rich.table import Table

from hourglass_client.cli.options import chosen_target, parse_body, target_options, window_option
from hourglass_client.cli.state import Group, State, add_switch, pass_state
from hourglass_client.cli.text import short, time_text
from hourglass_client.models import Schedule
from hourglass_client.windows import WINDOW_HELP


@click.group(cls=Group)
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
@click.option("--cron", metavar="EXPR", help="five-field cron expression, such as '0 9 * * MON-FRI'")
@click.option("--every", type=float, metavar="SECONDS", help="seconds between occurrences (at least 60)")
@click.option(
    "--timezone", metavar="ZONE", help="IANA zone of --cron and the window, such as Europe/Paris [default UTC]"
)
@click.option("--body", metavar="JSON", help="body of each occurrence (JSON)")
@click.option("--body-text", metavar="TEXT", help="body of each occurrence, this text")
@target_options
@click.option("--start-at", metavar="TIME", help="no occurrence before this RFC 3339 time")
@click.option("--end-at", metavar="TIME", help="no occurrence after this RFC 3339 time")
@click.option("--window", "window_spec", metavar="SPEC", help=WINDOW_HELP + " (for its occurrences)")
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
    body: str | None,
    body_text: str | None,
    window_spec: str | None,
    **given: Any,
) -> None:
    """Create or replace schedule NAME of QUEUE (a `--target-*` overrides the queue's target)."""
    target = chosen_target(given)  # the rest of `given` are `put_schedule`'s keywords, as named
    problems = schedule_problems(given, body, body_text)
    if problems:
        raise click.UsageError("the schedule is not valid:\n" + "\n".join(f"  {p}" for p in problems))
    s = state.client.put_schedule(
        queue,
        name,
        body=parse_body(body, body_text, "--body"),
        target=target,
        window=window_option(window_spec),
        **given,
    )
    state.emit(s.raw, lambda: state.out.print(schedule_table([s])))


def schedule_problems(given: Mapping[str, Any], body: str | None, body_text: str | None) -> list[str]:
    """Every bad field of a `schedules put` the CLI can see before asking the server (which names only one)."""
    problems = []
    cron, every, timezone = given["cron"], given["every"], given["timezone"]
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
    for flag, value in (("--start-at", given["start_at"]), ("--end-at", given["end_at"])):
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
    lambda client, queue, name: client.pause_schedule(queue, name),
    "queue",
    "name",
)
add_switch(
    schedules,
    "resume",
    "Resume a schedule.",
    "schedule",
    lambda client, queue, name: client.resume_schedule(queue, name),
    "queue",
    "name",
)


# --- bulk operations ----------------------------------------------------------------------------
