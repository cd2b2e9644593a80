"""The sweeper's view of each queue (its rate limits, its ordering, whether its hand-offs are claimed), read at
most once per queue per CONTROL_TTL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from hourglass.core import delivery_control
from hourglass.core.delivery_control import DeliveryControl
from hourglass.core.model import Ordering, Queue
from hourglass.core.pacing import Rates
from hourglass.errors import NewerFormatError, StoreError
from hourglass.logs import log

# How long the sweeper trusts what it read of a queue's limits; the dispatcher checks every start
# against the queue it reads anyway, so a stale answer here costs order, never the bound.
CONTROL_TTL = timedelta(seconds=30)

V = TypeVar("V")


class QueueLimits:
    """The sweeper's view of each queue: its rate limits, its ordering, whether its hand-offs are claimed; one
    read of the queue (and one of whether it has schedules) per queue per CONTROL_TTL."""

    def __init__(
        self,
        read: Callable[[str], Queue | None],
        clock: Callable[[], datetime],
        scheduled: Callable[[str], bool] = lambda queue: True,
    ) -> None:
        self.read = read
        self.clock = clock
        self.scheduled = scheduled
        self._seen: dict[str, tuple[datetime, DeliveryControl | NewerFormatError]] = {}
        self._schedules: dict[str, tuple[datetime, bool]] = {}
        self._lock = threading.Lock()

    def rate(self, queue: str) -> Rates | None:
        try:
            return delivery_control.rates(self._control(queue))
        except NewerFormatError:
            # A queue a newer release wrote: its messages go out unpaced, and this release's dispatchers, which read
            # the queue before any start, send their timers back unstarted (docs/upgrades.md): the sweep goes on.
            return None

    def forget(self, queue: str) -> None:
        """A PUT of the queue in this process: read again on next use."""
        with self._lock:
            self._seen.pop(queue, None)
            self._schedules.pop(queue, None)

    def claims(self, queue: str) -> bool:
        """Whether the sweep claims this queue's due messages: a queue using an opt-in feature
        (`delivery_control.claims_hand_offs`), a newer release's, or one with schedules (the claim returns an
        occurrence's item, from which the sweep stores the next one ahead: `transitions.chain_ahead`). A view up
        to CONTROL_TTL old only moves a message between a claimed and an unclaimed hand-off, both safe."""
        try:
            if delivery_control.claims_hand_offs(self._control(queue)):
                return True
        except NewerFormatError:
            return True
        try:
            return self._remembered(self._schedules, queue, lambda: self.scheduled(queue))
        except (NewerFormatError, StoreError):  # not remembered: the next chunk of the queue asks again
            return True

    def ordering(self, queue: str) -> Ordering | None:
        """The queue's ordering (v1.3) as read at most CONTROL_TTL ago."""
        return self._control(queue).ordering

    def _control(self, queue: str) -> DeliveryControl:
        control = self._remembered(self._seen, queue, lambda: self._read_control(queue))
        if isinstance(control, NewerFormatError):
            raise control
        return control

    def _read_control(self, queue: str) -> DeliveryControl | NewerFormatError:
        try:
            return delivery_control.of(self.read(queue))
        except NewerFormatError as exc:
            log("newer_item_format", queue=queue, error=str(exc))
            return exc  # remembered too: read again only after CONTROL_TTL

    def _remembered(self, cache: dict[str, tuple[datetime, V]], queue: str, read: Callable[[], V]) -> V:
        """What `read` gives for `queue`, as read at most CONTROL_TTL ago (read now, and kept, if older)."""
        now = self.clock()
        with self._lock:
            cached = cache.get(queue)
        if cached is None or now - cached[0] >= CONTROL_TTL:
            cached = (now, read())
            with self._lock:
                cache[queue] = cached
        return cached[1]
