"""`hourglass keys ...`: one flow key of a queue with `ordering` (v1.3): show its head, waiting and held state,
and release it after a failure held it."""

from __future__ import annotations

import click
from rich.table import Table

from hourglass_client.cli.state import Group, State, pass_state
from hourglass_client.models import KeyState

KEY_HELP = 'the flow key (messages without one share the key "")'


@click.group(cls=Group)
def keys() -> None:
    """Show a flow key of an ordered queue, or release it after a failure held it."""


def key_label(flow_key: str) -> str:
    """The key as said in a line: quoted, so that "" and spaces read as what they are."""
    return f'"{flow_key}"'


def key_table(key: KeyState) -> Table:
    table = Table("flow key", "head", "waiting", "held")
    table.add_row(key_label(key.flow_key), key.head or "", str(key.waiting), "yes" if key.held else "no")
    return table


@keys.command("show", epilog=f"FLOW_KEY: {KEY_HELP}.")
@click.argument("queue")
@click.argument("flow_key")
@pass_state
def keys_show(state: State, queue: str, flow_key: str) -> None:
    """Show FLOW_KEY of QUEUE: the message at its head, how many wait behind it, and whether it is held."""
    key = state.client.key(queue, flow_key)
    state.emit(key.raw, lambda: state.out.print(key_table(key)))


@keys.command("release", epilog=f"FLOW_KEY: {KEY_HELP}.")
@click.argument("queue")
@click.argument("flow_key")
@pass_state
def keys_release(state: State, queue: str, flow_key: str) -> None:
    """Release FLOW_KEY of QUEUE, held after a failure: its next message may start (404 when nothing is held)."""
    key = state.client.release_key(queue, flow_key)
    state.emit(key.raw, lambda: state.out.print(f"released key {key_label(key.flow_key)} of {queue}"))
