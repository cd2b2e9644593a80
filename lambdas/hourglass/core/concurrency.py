"""Concurrency leases: the slot items an attempt may hold, which it tries, and how long a refused one waits."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from hourglass.core import retry
from hourglass.core.model import DEFAULT_PRIORITY, Status

# Conditional writes tried per start: each failed one costs a write unit, so few, then wait.
PROBES = 3
FIRST_WAIT = 1.0
MAX_WAIT = 8.0
# A refused attempt's wait is lengthened by up to this share of itself, so that refused attempts spread out.
MAX_BUSY_WAIT_STRETCH = 0.25


@dataclass(frozen=True)
class Lease:
    """Slot `slot` of a queue (or of its flow key `flow_key`) belongs to `holder` until `until_ms` (the
    attempt's delivery lease)."""

    slot: int
    holder: str
    until_ms: int
    flow_key: str | None = None
    layout: int = 1  # the queue's slot layout it was taken in (`keys.slot_pk`), and the queue's life
    epoch_ms: int = 0


def binds(limit: int, rate: float | None, lease_s: float) -> bool:
    """Whether a concurrency limit can refuse an attempt at all: not when a rate paces every attempt of the
    same scope so that a lease's length (which outlasts its attempt) never holds more than `limit` starts,
    the rate's bound `r·L + max(1, r)` over L ≥ 1 s. Then no slot item is needed."""
    return rate is None or rate * max(lease_s, 1.0) + max(1.0, rate) > limit


def holder(message_id: str, version: int) -> str:
    """Who holds a slot: the attempt of the timer for `version` (a pending version) of the message. Only it may
    release the slot (a late release of an older one is a no-op), and its message's item tells when it ended."""
    return f"{message_id}#{version}"


def held_by(holder_id: str) -> tuple[str, int]:
    """The message id and pending version of a holder."""
    message_id, _, version = holder_id.rpartition("#")
    return message_id, int(version)


def attempt_ended(holder_id: str, status: Status | None, version: int | None) -> bool:
    """Whether the attempt holding a slot is over, from its message item read strongly consistently (`status`,
    `version`; None: no item). An attempt of the timer for pending(v) begins by writing v + 1 (delivering), or
    w + 1 over a delivering(w) whose lease ran out; its request runs while the item is delivering, and the
    attempt's outcome (or put-back, or end before the delivery) is the next version, written after the request
    finished or was cut at the timeout. So a version above v that is not delivering means the attempt is over:
    it wrote its outcome, or never began (the item moved on without it, and its begin can no longer succeed).
    Anything else (still pending(v): the begin may come; delivering: maybe this attempt's request; no item: the
    timer may have beaten its ingest write) is not over: the slot waits for its lease."""
    if status is None or version is None or status is Status.DELIVERING:
        return False
    return version > held_by(holder_id)[1]


def probe_order(holder_id: str, limit: int, seed: int = 0, probes: int = PROBES) -> tuple[int, ...]:
    """Distinct slots to try, starting at a spread point so concurrent attempts rarely collide."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    first = zlib.crc32(f"{holder_id}#{seed}".encode()) % limit
    return tuple((first + step) % limit for step in range(min(probes, limit)))


def is_free(until_ms: int | None, now_ms: int) -> bool:
    """A slot is free when never held, released (0) or its holder's lease ran out (its holder's attempt may
    also have ended before: `attempt_ended`, which needs a read of the holder's message)."""
    return until_ms is None or until_ms < now_ms


def busy_wait(waits: int, jitter: float = 0.0, priority: int = DEFAULT_PRIORITY) -> float:
    """Seconds before a refused attempt tries again (it stays pending); doubles per refusal, up to 8 s. Above
    the default priority it halves every two steps (a 9 waits up to 2 s): a slot freed by an outcome goes to
    whoever asks first, so a higher priority asks more often; the default and below wait as they always did."""
    base = min(MAX_WAIT, FIRST_WAIT * 2.0 ** min(max(waits, 0), 16))
    sooner = 2.0 ** (-max(0, priority - DEFAULT_PRIORITY) / 2)
    return retry.stretched(base * sooner, jitter, MAX_BUSY_WAIT_STRETCH)
