"""Pacing items in memory for the Pacer's tests: written conditionally as DynamoDB would (one write at a time per
item), with the same answers as `adapters.pacing_storage` (a lost write returns the winner's state)."""

from __future__ import annotations

import threading
from typing import Any

from hourglass.core.pacing import Item, PaceState, Window


class PacingItems:
    def __init__(self) -> None:
        self.items: dict[Item, PaceState] = {}
        self.lock = threading.Lock()
        self.writes = 0
        self.tries = 0

    def advance_pace(
        self, queue: str, item: Item, expected: PaceState, taken: tuple[int, ...], new_held: str | None
    ) -> tuple[bool, PaceState]:
        with self.lock:
            self.tries += 1
            current = self.items.get(item, PaceState())
            if current != expected:
                return False, current
            self.items[item] = PaceState(taken, new_held)
            self.writes += 1
            return True, self.items[item]

    def pace_windows(
        self, queue: str, scope: str | None, width_us: int, first: int, count: int
    ) -> dict[int, PaceState]:
        with self.lock:
            return {
                item.window.index: state
                for item, state in self.items.items()
                if item.scope == scope
                and item.window.width_us == width_us
                and first <= item.window.index < first + count
            }

    def pace_state(self, queue: str, item: Item) -> PaceState:
        with self.lock:
            return self.items.get(item, PaceState())

    def held_fence(self, queue: str, item: Item, expected: str | None, new: str | None) -> dict[str, Any]:
        return {"item": item, "expected": expected, "new": new}

    def held_room(self, queue: str, item: Item, taken: tuple[int, ...]) -> int:
        return 900

    def window_items(self, scope: str | None) -> list[Window]:
        return sorted((item.window for item in self.items if item.scope == scope), key=lambda w: w.index)
