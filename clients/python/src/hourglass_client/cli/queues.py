"""`hourglass queues ...`: create (every setting a flag), inspect, pause, resume and delete queues."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import click
from rich.table import Column, Table
from rich.text import Text

from hourglass_client.cli.options import chosen_settings, chosen_target, setting_options, target_options
from hourglass_client.cli.state import Group, State, add_switch, pass_state
from hourglass_client.cli.text import limits_text, number, ordering_text, target_text, window_text
from hourglass_client.client import Client
from hourglass_client.models import Queue
from hourglass_client.terminal import styled

STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"]


@click.group(cls=Group)
def queues() -> None:
    """Create, inspect, pause and delete queues."""


def paused_text(q: Queue) -> str:
    if not q.paused:
        return "no"
    return f"yes ({q.paused_reason})" if q.paused_reason else "yes"


def retry_text(q: Queue) -> str:
    retry = q.retry or {}
    return f"{retry.get('max_attempts', '')}x {retry.get('backoff_base', '')}..{retry.get('backoff_max', '')}s"


def queue_table(found: Iterable[Queue]) -> Table:
    """One row per queue: its target with its type, retry, limits (queue-wide and per flow key, with its ordering),
    window."""
    table = Table(
        "name",
        Column("target", overflow="fold"),  # wrapped on a narrow terminal, never cut
        "default delay",
        "ttl",
        "retry",
        "limits",
        "per key",
        Column("window", overflow="fold"),
        "paused",
    )
    for q in found:
        flow = q.flow_control or {}
        limits = limits_text(q.rate_limit, q.max_concurrency)
        timeout = number(q.timeout, "s")
        table.add_row(
            q.name,
            target_text(q.target),
            number(q.default_delay, "s"),
            number(q.ttl, "s"),
            retry_text(q),
            ", ".join(p for p in (limits, f"timeout {timeout}" if timeout else "") if p),
            ", ".join(
                p
                for p in (
                    limits_text(flow.get("key_rate_limit"), flow.get("key_max_concurrency")),
                    ordering_text(q.ordering),
                )
                if p
            ),
            window_text(q.window),
            paused_text(q),
        )
    return table


@queues.command("put")
@click.argument("name")
@target_options
@setting_options
@click.option("--settings", "settings_json", metavar="JSON", help="extra settings as a JSON object (merged last)")
@pass_state
def queues_put(state: State, name: str, settings_json: str | None, **given: Any) -> None:
    """Create or replace queue NAME (settings not given take the server's defaults)."""
    target = chosen_target(given)
    settings = json.loads(settings_json) if settings_json else None
    if settings is not None and not isinstance(settings, dict):
        raise click.UsageError("--settings must be a JSON object")
    q = state.client.put_queue(name, target=target, settings=settings, **chosen_settings(given))
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


def pending_count(client: Client, queue: str) -> int:
    q = client.get_queue(queue)
    return (q.counts or status_counts(client, queue, statuses=("pending",))).get("pending", 0)


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
    pending = pending_count(state.client, name)
    state.confirm(f"Deleting queue {name} cancels its {pending} pending messages and removes its schedules.", yes)
    state.client.delete_queue(name)
    state.emit({"deleted": name}, lambda: state.out.print(f"deleted queue {name}"))


add_switch(
    queues,
    "pause",
    "Pause queue NAME: no attempt starts until it is resumed.",
    "queue",
    lambda client, name: client.pause_queue(name),
    "name",
)
add_switch(
    queues,
    "resume",
    "Resume queue NAME: what fell due meanwhile is delivered in due order.",
    "queue",
    lambda client, name: client.resume_queue(name),
    "name",
)
