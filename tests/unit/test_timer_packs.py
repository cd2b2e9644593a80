"""Timer packs: timers due within a second share one SQS message; old single-timer bodies still read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hourglass.adapters.timer_queue import (
    MAX_PACK,
    PACK_SPAN_MS,
    TIMER_FORMAT,
    Scheduled,
    Timer,
    pack_to_json,
    packs,
    read_timers,
)
from hourglass.errors import ValidationError


def timer(i: int, due_ms: int) -> Timer:
    return Timer(queue="q", id=f"id{i}", version=1, due_ms=due_ms, sent_ms=5)


def scheduled(*dues: int) -> list[Scheduled]:
    return [Scheduled(timer(i, due), delay_seconds=due // 1000) for i, due in enumerate(dues)]


def test_a_pack_reads_back_as_its_timers() -> None:
    timers = [timer(1, 1000), timer(2, 1500), timer(3, 1999)]
    assert read_timers(pack_to_json(timers)) == timers


def test_chained_occurrence_timers_read_back_chained_single_or_packed() -> None:
    chained = [replace(timer(1, 1000), chained=True), timer(2, 1200), replace(timer(3, 1500), chained=True, waits=2)]
    assert read_timers(pack_to_json(chained)) == chained
    assert read_timers(pack_to_json(chained[:1])) == chained[:1]


def test_keyed_timers_read_back_with_key_priority_and_chained() -> None:
    keyed = [
        timer(1, 1000),
        replace(timer(2, 1100), key="t1", priority=9, chained=True),
        replace(timer(3, 1200), key="t2", waits=1),
        replace(timer(4, 1300), priority=0),
        replace(timer(5, 1400), chained=True),
    ]
    assert read_timers(pack_to_json(keyed)) == keyed
    assert read_timers(pack_to_json(keyed[1:2])) == keyed[1:2]


def test_timers_paced_outside_the_queue_scope_read_back_so_single_or_packed() -> None:
    keyed_only = [
        replace(timer(1, 1000), latest_ms=1250, key="t1", queue_scoped=False),
        replace(timer(2, 1100), latest_ms=1350, key="t2"),
        replace(timer(3, 1200), latest_ms=1450, queue_scoped=False),
    ]
    assert read_timers(pack_to_json(keyed_only)) == keyed_only
    assert read_timers(pack_to_json(keyed_only[2:])) == keyed_only[2:]


def test_a_single_timer_body_is_the_old_format_with_its_format_version() -> None:
    assert json.loads(pack_to_json([timer(1, 1000)])) == {"fv": TIMER_FORMAT, **json.loads(timer(1, 1000).to_json())}


def test_timers_due_within_the_span_share_a_pack() -> None:
    grouped = packs(scheduled(3000, 1000, 1000 + PACK_SPAN_MS - 1, 1000 + PACK_SPAN_MS))
    assert [[s.timer.due_ms for s in pack] for pack in grouped] == [[1000, 1999], [2000], [3000]]


def test_a_pack_holds_at_most_max_pack_timers() -> None:
    grouped = packs(scheduled(*[1000] * (MAX_PACK + 1)))
    assert [len(pack) for pack in grouped] == [MAX_PACK, 1]


@pytest.mark.parametrize("body", ['{"q":"q","id":"a","v":1,"due":1,"sent":1,"more":[["q","b"]]}', "[]", "x"])
def test_a_malformed_pack_is_refused(body: str) -> None:
    with pytest.raises(ValidationError):
        read_timers(body)
