"""The ordering section's write units (v1.3), in process on a fixed clock: ordering adds exactly 2 WU per message,
and every key's messages start in due order."""

from __future__ import annotations

from typing import Any

from bench.delivery_limits import units_per_message
from bench.ordering import ORDERED

KEYS, MESSAGES = 4, 40


def test_ordering_adds_two_write_units_per_message_and_keeps_each_keys_order() -> None:
    starts: list[tuple[int, Any]] = []
    plain, _ = units_per_message({}, MESSAGES, swept=False, flow_keys=KEYS)
    ordered, items = units_per_message(ORDERED, MESSAGES, swept=False, flow_keys=KEYS, starts=starts)
    by_key: dict[int, list[int]] = {}
    for _, body in starts:
        by_key.setdefault(body % KEYS, []).append(body)
    assert (round(ordered - plain, 2), items["key order"], len(starts)) == (2.0, 2.0, MESSAGES)
    assert all(bodies == sorted(bodies) for bodies in by_key.values())
