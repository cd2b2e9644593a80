"""Concurrency leases and attempt deadlines: slot choice, expiry, waits, and a 120 s attempt's budget."""

from __future__ import annotations

import heapq
import itertools
import operator
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hourglass import contract
from hourglass.core import deadline
from hourglass.core.concurrency import (
    MAX_WAIT,
    PROBES,
    attempt_ended,
    binds,
    busy_wait,
    held_by,
    holder,
    is_free,
    probe_order,
)
from hourglass.core.delivery_control import DEFAULT_TIMEOUT, MAX_TIMEOUT
from hourglass.core.keys import slot_key
from hourglass.core.model import Status
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@given(message_id=st.text(min_size=1, max_size=40), limit=st.integers(1, 1000), seed=st.integers(0, 99))
def test_probes_are_distinct_slots_of_the_queue(message_id, limit, seed):
    order = probe_order(holder(message_id, 1), limit, seed)
    assert len(order) == min(PROBES, limit)
    assert len(set(order)) == len(order)
    assert all(0 <= slot < limit for slot in order)


def test_probe_start_spreads_over_the_slots():
    firsts = {probe_order(holder(f"m{n}", 1), 100)[0] for n in range(1000)}
    assert len(firsts) > 80


def test_probe_order_rejects_an_empty_limit():
    with pytest.raises(ValueError):
        probe_order("m#1", 0)


def test_slot_keys_sort_by_number():
    assert [slot_key(n) for n in (0, 9, 10, 999)] == sorted(slot_key(n) for n in (0, 9, 10, 999))


def test_a_slot_is_free_when_unused_released_or_expired():
    assert is_free(None, 1000) and is_free(0, 1000) and is_free(999, 1000)
    assert not is_free(1000, 1000) and not is_free(5000, 1000)


def test_refused_attempts_wait_longer_each_time_up_to_the_cap():
    assert [busy_wait(n) for n in range(6)] == [1, 2, 4, 8, 8, 8]
    assert busy_wait(50, jitter=1.0) <= MAX_WAIT * 1.25


def test_a_higher_priority_asks_for_a_busy_slot_more_often():
    waits = [[busy_wait(n, priority=p) for n in range(6)] for p in (9, 7, 5, 0)]
    assert waits == [[0.25, 0.5, 1, 2, 2, 2], [0.5, 1, 2, 4, 4, 4], [1, 2, 4, 8, 8, 8], [1, 2, 4, 8, 8, 8]]


def test_the_lease_outlasts_the_longest_attempt_and_its_bookkeeping():
    begin = T0
    started = begin + timedelta(seconds=deadline.BEGIN_TO_START)
    finished = deadline.attempt_deadline(started, MAX_TIMEOUT) + timedelta(seconds=deadline.BOOKKEEPING)
    assert deadline.delivery_lease(begin, MAX_TIMEOUT) >= finished


def test_the_dispatcher_function_outlives_the_longest_invocation():
    longest = deadline.MAX_SLEEP + deadline.BEGIN_TO_START + MAX_TIMEOUT + deadline.BOOKKEEPING
    assert deadline.function_timeout(MAX_TIMEOUT) >= longest
    assert deadline.function_timeout(MAX_TIMEOUT) <= 900


def test_the_default_timeout_keeps_todays_one_minute_function():
    assert deadline.function_timeout(15) == 60


def test_visibility_covers_the_function_timeout_six_times():
    assert deadline.visibility_timeout(MAX_TIMEOUT) == 6 * deadline.function_timeout(MAX_TIMEOUT)


@pytest.mark.parametrize("timeout", [1, 2, 15, 120])
def test_http_timeouts_add_up_to_the_queue_timeout(timeout):
    connect, read = deadline.http_timeouts(timeout)
    assert connect + read == pytest.approx(timeout)
    assert 0 < connect <= deadline.MAX_CONNECT and read > 0


def in_flight_peak(intervals: list[tuple[int, int]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals], key=lambda e: e)
    peak = current = 0
    for _, step in events:  # an end at the same instant as a start is processed first (-1 < 1)
        current += step
        peak = max(peak, current)
    return peak


@given(
    limit=st.integers(1, 5),
    timeout=st.integers(1, 120),
    attempts=st.lists(
        st.tuples(
            st.integers(0, 400_000),  # begin (ms)
            st.floats(0, 1),  # how much of the timeout the request takes
            st.floats(0, 1),  # begin-to-start delay, as a share of the allowed second
            st.floats(0, 1),  # bookkeeping, as a share of the allowed margin
            st.booleans(),  # the dispatcher dies before releasing
            st.integers(0, 9),  # probe seed
        ),
        max_size=40,
    ),
)
def test_leases_keep_at_most_the_limit_in_flight_even_when_dispatchers_die(limit, timeout, attempts):
    """Slot items with conditional acquire (free or expired) and holder-checked release: the HTTP
    exchanges in flight never exceed the limit, whatever the durations, crashes and interleaving."""
    slots: dict[int, tuple[str, int]] = {}
    # (time, kind: 0 release / 1 acquire, attempt index), earliest first
    events = [(begin, 1, index) for index, (begin, *_rest) in enumerate(attempts)]
    heapq.heapify(events)
    intervals: list[tuple[int, int]] = []
    held: dict[int, int] = {}
    while events:
        now, kind, index = heapq.heappop(events)
        begin, share, lead, bookkeeping, dies, seed = attempts[index]
        me = holder(f"m{index}", 1)
        if kind == 0:
            slot = held[index]
            if slots.get(slot, ("", 0))[0] == me:
                slots[slot] = (me, 0)
            continue
        lease = deadline.delivery_lease(T0 + timedelta(milliseconds=begin), timeout)
        until = int((lease - T0).total_seconds() * 1000)
        for slot in probe_order(me, limit, seed):
            if is_free(slots.get(slot, ("", None))[1], now):
                slots[slot] = (me, until)
                held[index] = slot
                break
        else:
            continue
        start = begin + int(lead * deadline.BEGIN_TO_START * 1000)
        end = start + int(share * timeout * 1000)
        intervals.append((start, end))
        if not dies:
            release = end + int(bookkeeping * deadline.BOOKKEEPING * 1000)
            heapq.heappush(events, (release, 0, index))
    assert in_flight_peak(intervals) <= limit


def test_the_default_timeout_keeps_todays_http_timeouts():
    assert deadline.http_timeouts(15) == (5.0, 10.0)


def test_the_default_lease_is_the_default_attempts_bound():
    # and no longer: a message whose dispatcher died mid-attempt is taken over when its lease ends
    begin = T0
    lease = (deadline.delivery_lease(begin, DEFAULT_TIMEOUT) - begin).total_seconds()
    assert lease == contract.DEFAULT_DELIVERY_LEASE


def test_a_missed_renewal_leaves_the_hold_running():
    hold = contract.DEFAULT_TIMER_HOLD
    assert 2 * deadline.heartbeat_every(hold) < hold


@pytest.mark.parametrize(
    ("limit", "rate", "lease_s", "expected"),
    [
        (100, 1.0, 61.0, False),
        (62, 1.0, 61.0, False),
        (61, 1.0, 61.0, True),
        (2, 20.0, 61.0, True),
        (5, None, 61.0, True),
    ],
)
def test_a_limit_binds_unless_the_rate_keeps_a_lease_below_it(limit, rate, lease_s, expected):
    """`r·L + max(1, r)` starts at most within any lease of L seconds: a limit at or above that never refuses."""
    assert binds(limit, rate, lease_s) is expected


# Slots freed by outcomes (no release write) --------------------------------------------------------------

Rule = Callable[[str, Status | None, int | None], bool]


def too_loose_delivering(holder_id: str, status: Status | None, version: int | None) -> bool:
    """Counts a delivering message past the holder's version as ended: its own begin does that."""
    return status is not None and version is not None and version > held_by(holder_id)[1]


def too_loose_pending(holder_id: str, status: Status | None, version: int | None) -> bool:
    """Counts pending(v) as ended: the holder may still be about to begin."""
    return status not in (None, Status.DELIVERING) and version is not None and version >= held_by(holder_id)[1]


def too_loose_missing(holder_id: str, status: Status | None, version: int | None) -> bool:
    """Counts a missing item as ended: the timer may have beaten its ingest write."""
    return status is None or attempt_ended(holder_id, status, version)


@dataclass
class Item:
    status: Status = Status.PENDING
    version: int = 1
    claimed_until: int = 0
    written_at: int = 0


def simulate(ended: Rule, rng: random.Random) -> tuple[int, int]:
    """Dispatchers taking slots as `ConcurrencyStorage.acquire_slot` does (free by lease, or an ended holder's
    per `ended`), beginning as `begin_delivery` does, and the messages' other writers: outcomes without releases,
    retries, put-backs, ends before delivery, crashes mid-request (the timer comes back for a takeover), crashes
    before the begin, timers that beat their ingest write, edits that leave a stale timer, redeliveries, and
    dead-lettering past a lease. Returns the peak of requests in flight and the limit."""
    limit, timeout = rng.randint(1, 3), rng.choice([1, 15, 120])
    lease_ms = int((deadline.delivery_lease(T0, timeout) - T0).total_seconds() * 1000)
    items = [Item(written_at=rng.choice([0, 0, 150, 2_000])) for _ in range(rng.randint(2, 6))]
    slots: dict[int, tuple[str, int]] = {}
    events: list[tuple[int, int, str, tuple[Any, ...]]] = []
    order = itertools.count()
    intervals: list[tuple[int, int]] = []

    def at(when: int, kind: str, *args: Any) -> None:
        heapq.heappush(events, (when, next(order), kind, args))

    def item_state(index: int, now: int) -> tuple[Status | None, int | None]:
        item = items[index]
        return (None, None) if now < item.written_at else (item.status, item.version)

    def write(index: int, expected: int, status: Status, now: int, timer_after: int | None = None) -> None:
        """A version written over `expected` (only if the item still has it), maybe with a new timer."""
        item = items[index]
        if item.version != expected or now < item.written_at:
            return
        item.status, item.version = status, item.version + 1
        if timer_after is not None:
            at(now + timer_after, "timer", index, item.version)

    for index in range(len(items)):
        at(rng.randint(0, 2_000), "timer", index, 1)
    for _ in range(600):
        if not events:
            break
        now, _, kind, args = heapq.heappop(events)
        if kind == "timer":
            index, version = args
            me = holder(f"m{index}", version)
            until = now + lease_ms
            for slot in probe_order(me, limit, rng.randint(0, 9)):
                held, held_until = slots.get(slot, ("", None))
                if is_free(held_until, now) or ended(held, *item_state(int(held_by(held)[0][1:]), now)):
                    slots[slot] = (me, until)
                    at(now + rng.randint(0, 300), "begin", index, version, slot, until, now)
                    break
            else:
                at(now + rng.randint(1_000, 8_000), "timer", index, version)
        elif kind == "begin":
            index, version, slot, until, acquired = args
            item = items[index]
            me = holder(f"m{index}", version)
            startable = now >= item.written_at and (
                (item.status is Status.PENDING and item.version == version)
                or (item.status is Status.DELIVERING and item.claimed_until < now)
            )
            if rng.random() < 0.05 or not startable:
                # crashed before the begin (the lease frees the slot), or not begun: the slot is given back
                if startable:
                    at(until + rng.randint(0, 5_000), "timer", index, version)
                elif slots.get(slot, ("", 0))[0] == me:
                    slots[slot] = (me, 0)
                if not startable and now < item.written_at:
                    at(now + 1_000, "timer", index, version)
                continue
            item.status, item.version, item.claimed_until = Status.DELIVERING, item.version + 1, until
            ours = item.version
            fate = rng.random()
            if fate < 0.15:  # put back before its start: pending again, a new timer for the new version
                write(index, ours, Status.PENDING, now + rng.randint(0, 900), rng.randint(0, 3_000))
                continue
            if fate < 0.2:  # ended before the delivery (queue deleted, schedule gone, expired)
                write(index, ours, Status.CANCELLED, now + rng.randint(0, 900))
                continue
            start = acquired + int(rng.random() * deadline.BEGIN_TO_START * 1000)
            end = start + int(rng.random() * timeout * 1000)
            intervals.append((max(start, now), end))
            if fate < 0.35:  # died mid-request: no outcome; its timer comes back after the lease for a takeover
                at(until + rng.randint(0, 5_000), "timer", index, version)
                if rng.random() < 0.3:
                    at(until + rng.randint(0, 5_000), "dead_letter", index, ours)
                continue
            outcome_at = end + int(rng.random() * deadline.BOOKKEEPING * 1000)
            at(outcome_at, "outcome", index, ours)
        elif kind == "outcome":
            index, ours = args
            if items[index].status is Status.DELIVERING and items[index].version == ours:
                if rng.random() < 0.4:  # failed, retried: pending with a timer of its own
                    write(index, ours, Status.PENDING, now, rng.randint(0, 3_000))
                else:
                    write(index, ours, Status.DELIVERED, now)
                    if rng.random() < 0.3:  # redelivered later: pending again, a new timer
                        at(now + rng.randint(0, 3_000), "redeliver", index)
            if rng.random() < 0.2 and items[index].status is Status.PENDING:
                # edited: a new version and timer; the old timer still arrives (and cannot begin)
                write(index, items[index].version, Status.PENDING, now, rng.randint(0, 2_000))
        elif kind == "redeliver":
            index = args[0]
            if items[index].status is Status.DELIVERED:
                write(index, items[index].version, Status.PENDING, now, 0)
        elif kind == "dead_letter":
            index, ours = args
            if items[index].status is Status.DELIVERING and items[index].claimed_until < now:
                write(index, items[index].version, Status.FAILED, now)
    return in_flight_peak(intervals), limit


@settings(max_examples=150, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_outcomes_free_slots_and_at_most_the_limit_is_in_flight(rng):
    peak, limit = simulate(attempt_ended, rng)
    assert peak <= limit


@pytest.mark.parametrize("loose", [too_loose_delivering, too_loose_pending, too_loose_missing])
def test_the_simulation_catches_an_ended_rule_that_is_too_loose(loose):
    assert any(operator.gt(*simulate(loose, random.Random(seed))) for seed in range(300))


def test_an_attempt_ends_with_a_later_version_that_is_not_delivering():
    me = holder("m", 4)
    assert [attempt_ended(me, status, 6) for status in (Status.PENDING, Status.DELIVERED, Status.CANCELLED)] == [
        True
    ] * 3
    assert not attempt_ended(me, Status.DELIVERING, 6)  # its own begin, or a takeover of its message
    assert not attempt_ended(me, Status.PENDING, 4)  # not begun yet: the begin may still come
    assert not attempt_ended(me, None, None)  # the timer may have beaten its ingest write
