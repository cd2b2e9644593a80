"""The timers of this dispatcher process by queue and flow key, from their batch's read until their turn is decided
(v1.3): a message of an ordered queue takes a free key only after the ones of its key due before it, received by
this process too, have had their turn (a burst's threads reach the key in any order)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from hourglass.core.handoff import Timer

# The longest a timer waits for the ones of its key due before it (seconds, real time): they are past their own
# start already, so only a slow thread or store keeps them; and all but the first of a key wait in line anyway.
MAX_WAIT_S = 2.0

Entry = tuple[int, str]


class ArrivalBoard:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._present: dict[tuple[str, str], set[Entry]] = {}

    def arrived(self, timers: Iterable[Timer]) -> None:
        with self._lock:
            for timer in timers:
                self._present.setdefault((timer.queue, timer.scope), set()).add((timer.due_ms, timer.id))

    def left(self, timer: Timer) -> None:
        """The timer's turn is decided (or it left the gate before): those behind it go on. Idempotent."""
        with self._lock:
            scope = (timer.queue, timer.scope)
            entries = self._present.get(scope, set())
            entries.discard((timer.due_ms, timer.id))
            if not entries:
                self._present.pop(scope, None)
            self._lock.notify_all()

    def wait_for_earlier(self, timer: Timer, timeout: float = MAX_WAIT_S) -> None:
        """Returns once no timer of the same queue and key due before `timer` is still before its turn, or after
        `timeout`."""
        me = (timer.due_ms, timer.id)
        with self._lock:
            self._lock.wait_for(
                lambda: not any(entry < me for entry in self._present.get((timer.queue, timer.scope), ())),
                timeout=timeout,
            )
