"""Giving way: a pending message version moved to a later pacing slot so that a higher priority takes its own.

The one state change the hand-off makes itself, so it takes the store and settings, not the `Context` that
builds the hand-off (`service.transitions` holds every other change of a message's state).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core import handoff, lifecycle
from hourglass.core.handoff import Claim
from hourglass.core.model import Status
from hourglass.core.pacing import Slot
from hourglass.errors import StaleVersionError
from hourglass.settings import Settings


class StorageUsed(storage.Messages, storage.MessageChanges, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


def give_way(
    store: StorageUsed,
    settings: Settings,
    queue: str,
    message_id: str,
    version: int,
    slot: Slot,
    now: datetime,
    fences: Sequence[dict[str, Any]],
) -> Claim | None:
    """A pending message version not begun yet moved to a later pacing `slot`, so that a higher priority takes
    its slot (`service.handoff`): a new version at the same due time, written as a PATCH writes it, in one
    transaction with `fences` (the changes of the records of who holds the slots), whose timer the caller
    sends (the old timer then finds a changed version and is dropped). None, and nothing written, when it began,
    changed or ended meanwhile, or the record changed: it keeps its slot."""
    message = store.get_message(queue, message_id)
    if message is None or message.status is not Status.PENDING or message.version != version:
        return None
    change = lifecycle.reschedule(
        message,
        due=message.due_at,
        body=message.body,
        now=now,
        retention=settings.retention,
        scheduled=message.scheduled,
    )
    timing = settings.timing
    placement = handoff.paced(handoff.place(change.message, now, timing, written_first=True), slot, now, timing)
    if change.message.status is not Status.PENDING or placement.claim() is None:
        return None
    try:
        store.await_retry(change.leased(placement.lease), placement.keys, fences=fences)
    except StaleVersionError:
        return None
    return placement.claim()
