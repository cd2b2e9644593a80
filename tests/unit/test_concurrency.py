"""Concurrency leases and attempt deadlines: slot choice, expiry, waits, and a 120 s attempt's budget."""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta

import pytest
from hourglass import contract
from hourglass.core import deadline
from hourglass.core.concurrency import MAX_WAIT, PROBES, binds, busy_wait, holder, is_free, probe_order
from hourglass.core.delivery_control import DEFAULT_TIMEOUT, MAX_TIMEOUT
from hourglass.core.keys import slot_key
from hypothesis import given
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
