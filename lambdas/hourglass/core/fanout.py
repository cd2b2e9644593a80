"""Fan-out of a sweep: how many invocations share the shards, which shards each sweeps, the event of each."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hourglass.errors import ValidationError


@dataclass(frozen=True)
class Invocation:
    """What a scheduled run asks one fan-out invocation to do: sweep `shards` up to `until` (epoch ms) for run `run`."""

    shards: tuple[int, ...]
    until: int | None = None
    run: int = 0

    def to_event(self) -> dict[str, Any]:
        return {"shards": list(self.shards), "until": self.until, "run": self.run}


def invocation_count(estimate: int, capacity: int, shards: int, *, lagging: bool) -> int:
    """Invocations for a window with about `estimate` due entries when one can claim `capacity`.

    A sweep that fell behind (ran out of time, or a fan-out invocation has not reported) gets every shard its
    own invocation: that is as far as the sweep can be split.
    """
    if lagging:
        return shards
    return max(1, min(shards, math.ceil(estimate / max(1, capacity))))


def split(shards: Sequence[int], invocations: int) -> list[list[int]]:
    """Round-robin groups: shards hold about the same share of the due entries (crc32 of random ids)."""
    count = max(1, min(invocations, len(shards)))
    return [list(shards[start::count]) for start in range(count)]


def parse_invocation(event: Mapping[str, Any], shard_count: int) -> Invocation:
    shards = event.get("shards")
    if not isinstance(shards, list) or not shards:
        raise ValidationError("shards", "must be a non-empty list of shard numbers")
    if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < shard_count for s in shards):
        raise ValidationError("shards", f"must be integers from 0 to {shard_count - 1}")
    until, run = event.get("until"), event.get("run", 0)
    if until is not None and (not isinstance(until, int) or isinstance(until, bool)):
        raise ValidationError("until", "must be epoch milliseconds")
    if not isinstance(run, int) or isinstance(run, bool):
        raise ValidationError("run", "must be an integer")
    return Invocation(tuple(dict.fromkeys(shards)), until, run)
