"""The start gate: pause first, then the pacing slot's window."""

from __future__ import annotations

import pytest
from hourglass.core.pacing import Slot
from hourglass.core.start_gate import Gate, gate

SLOT = Slot(start_ms=1_000, latest_ms=1_250)


@pytest.mark.parametrize(
    ("now", "expected"),
    [(999, Gate.EARLY), (1_000, Gate.START), (1_250, Gate.START), (1_251, Gate.REPACE)],
)
def test_a_paced_attempt_starts_only_inside_its_slot(now, expected):
    assert gate(now, slot=SLOT, paused=False, read_fresh=True) is expected


def test_an_unpaced_attempt_starts_whenever_it_is_called():
    assert gate(5, slot=None, paused=False, read_fresh=True) is Gate.START


def test_a_paused_queue_parks_even_inside_the_slot():
    assert gate(1_100, slot=SLOT, paused=True, read_fresh=True) is Gate.PARK


def test_a_stale_pause_read_decides_nothing():
    assert gate(1_100, slot=SLOT, paused=False, read_fresh=False) is Gate.REREAD
