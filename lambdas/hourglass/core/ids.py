"""Message identifiers: random for the API, deterministic for bulk loads and schedule occurrences."""

from __future__ import annotations

import uuid
from datetime import datetime

from hourglass.core import keys
from hourglass.core.timestamps import to_ms

_NAMESPACE = uuid.UUID("6f1d3c59-8a64-4c1e-9a55-3b1f3f0c2a11")


def new_id(partitions: int = 1) -> str:
    """A random id; over more than one partition, a spread message's, naming its partition (`keys.message_pk`)."""
    # Random, not time-ordered: sequential keys within one queue partition would defeat
    # DynamoDB's split-for-heat.
    hex_id = uuid.uuid4().hex
    return hex_id if partitions <= 1 else keys.spread_id(hex_id, partitions)


def deterministic_id(queue: str, key: str) -> str:
    return uuid.uuid5(_NAMESPACE, f"{queue}\x00{key}").hex


def occurrence_id(queue: str, schedule: str, at: datetime, version: int = 1, epoch: datetime | None = None) -> str:
    """The id of a schedule's occurrence at `at`, so that materializing it twice stores one message; a
    schedule of a later queue of the same name (`epoch`) never meets the ids of an earlier one's."""
    # NUL cannot appear in a schedule name, and a bulk-load key never starts with it.
    life = "" if epoch is None else f"\x00{to_ms(epoch)}"
    return deterministic_id(queue, f"\x00schedule\x00{schedule}\x00{version}\x00{to_ms(at)}{life}")


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 64 and all(c in "0123456789abcdef-" for c in value)
