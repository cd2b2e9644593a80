"""The hold: due-index partitions where a paused queue's (or a paced backlog's) due messages wait for a drain."""

from __future__ import annotations

from datetime import datetime

from hourglass.core.schedule import SweepKeys, shard_of, sort_key
from hourglass.core.timestamps import to_ms

HOLD_PREFIX = "hold#"


def hold_pk(queue: str, shard: int) -> str:
    # Not a number, so no sweep of a due bucket ever reads it; one per shard spreads the writes.
    return f"{HOLD_PREFIX}{queue}#{shard}"


def hold_keys(queue: str, message_id: str, due: datetime, *, shards: int) -> SweepKeys:
    """Due-index keys that park a pending message: the drain reads them in due order."""
    return SweepKeys(pk=hold_pk(queue, shard_of(message_id, shards)), sk=sort_key(to_ms(due), message_id))


def hold_partitions(queue: str, shards: int) -> list[str]:
    """Every hold partition of a queue; the drain merges them by sort key."""
    return [hold_pk(queue, shard) for shard in range(shards)]


def is_held(sweep_pk: str | None) -> bool:
    return sweep_pk is not None and sweep_pk.startswith(HOLD_PREFIX)
