"""Whether a due attempt may start now: the queue's pause state and the attempt's pacing slot."""

from __future__ import annotations

from enum import StrEnum

from hourglass.core.pacing import Slot


class Gate(StrEnum):
    START = "start"
    EARLY = "early"  # before its slot: sleep until it (or re-send when far)
    REPACE = "repace"  # its slot has passed: take a new one, re-send, stay pending
    PARK = "park"  # the queue is paused: move to the hold, acknowledge the timer
    REREAD = "reread"  # the pause state read is too old to decide a start: read the queue again


def gate(now_ms: int, *, slot: Slot | None, paused: bool, read_fresh: bool) -> Gate:
    """Checked before the begin write and again just before the request; a stale read decides nothing."""
    if not read_fresh:
        return Gate.REREAD
    if paused:
        return Gate.PARK
    if slot is None:
        return Gate.START
    if now_ms < slot.start_ms:
        return Gate.EARLY
    if slot.missed(now_ms):
        return Gate.REPACE
    return Gate.START
