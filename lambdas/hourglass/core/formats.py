"""The format of each kind of stored record: what this release writes, the newest it reads (docs/upgrades.md).

A record without `fv` is format 1, as release 1.2.0 wrote it; a kind's format goes up by one when its meaning does.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hourglass.errors import NewerFormatError

ORIGINAL = 1  # a record written without `fv` (release 1.2.0)

# Kind -> the format this release writes and the newest it reads (docs/upgrades.md, "Formats").
FORMATS: Mapping[str, int] = MappingProxyType(
    {
        "timer": 2,  # format 1 plus `fv`
        "queue": 2,  # with `ordering`, `partitions` or `slot_layout` (a 1.2.0 reader would ignore them); else format 1
        "message": 1,
        "dedup": 1,
        "body": 1,  # body items and S3 body objects (metadata `fv`)
        "schedule": 1,
        "operation": 1,  # operation items and their running-list entries
        "notice": 1,  # `queue.paused` notices (a message's failure notice is its message item's)
        "attempt": 1,
        "pacing": 1,  # pacing items, with their holders record
        "slot": 1,  # concurrency slots
        "breaker": 1,
        "order": 1,  # ordering key items (new in 1.3.0)
        "due_width": 1,  # due-width bucket records (new in 1.3.0)
        "count": 1,
        "rate": 1,  # a queue's messages per window, until it is spread (new in 1.3.0)
        "sweep": 1,  # sweep-state and shard-progress items
        "queue_life": 1,  # the queue registry entry and the ended-life note
    }
)


def queue_format(ordered: bool, spread: bool = False) -> int:
    """A queue item's format: 2 when it keeps an `ordering`, spreads its messages (`partitions`) or its slots
    (`slot_layout`), which a 1.2.0 reader would ignore (rule 4)."""
    return FORMATS["queue"] if ordered or spread else ORIGINAL


def check(kind: str, fv: int | None) -> int:
    """The format of a stored record of `kind` (`fv` None: format 1); NewerFormatError when this release cannot
    read it: a newer release wrote it, and it is to be left as it is and retried later (rule 3)."""
    found = ORIGINAL if fv is None else fv
    if found > FORMATS[kind]:
        raise NewerFormatError(kind, found, FORMATS[kind])
    return found
