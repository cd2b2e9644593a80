"""`hourglass tail`: a queue's deliveries, retries and failures as they happen (by polling its lists)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import click

from hourglass_client.cli.state import Command, State, pass_state
from hourglass_client.cli.text import time_text
from hourglass_client.client import Client
from hourglass_client.models import Message
from hourglass_client.terminal import styled

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


@click.command(cls=Command)
@click.argument("queue")
@click.option("--interval", type=float, default=1.0, show_default=True, metavar="SECONDS", help="seconds between polls")
@click.option(
    "--count", type=int, default=0, metavar="N", help="stop after this many events [default 0: run until Ctrl-C]"
)
@click.option(
    "--timeout", type=float, default=0, metavar="SECONDS", help="stop after this many seconds [default 0: never]"
)
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
