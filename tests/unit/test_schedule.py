"""Due times, due-index keys, hand-off and lease windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core import schedule
from hourglass.core.timestamps import to_ms

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def secs(value: float) -> timedelta:
    return timedelta(seconds=value)


# --- due_time --------------------------------------------------------------------------------


def test_due_time_adds_the_delay():
    assert schedule.due_time(NOW, delay=30, deliver_at=None, default_delay=99) == NOW + secs(30)


def test_due_time_keeps_fractional_delays():
    assert schedule.due_time(NOW, delay=1.5, deliver_at=None, default_delay=0) == NOW + timedelta(milliseconds=1500)


def test_due_time_rounds_a_sub_millisecond_deliver_at_up():
    when = NOW + timedelta(seconds=60, microseconds=500)
    due = schedule.due_time(NOW, delay=None, deliver_at=when, default_delay=0)
    assert due == NOW + timedelta(seconds=60, milliseconds=1)


def test_due_time_rounds_a_sub_millisecond_delay_up():
    assert schedule.due_time(NOW, delay=0.0000001, deliver_at=None, default_delay=0) == NOW + timedelta(milliseconds=1)


def test_due_time_zero_delay_is_now():
    assert schedule.due_time(NOW, delay=0, deliver_at=None, default_delay=99) == NOW


def test_due_time_uses_deliver_at():
    when = NOW + timedelta(days=3)
    assert schedule.due_time(NOW, delay=None, deliver_at=when, default_delay=99) == when


def test_due_time_uses_default_delay_without_delay_or_deliver_at():
    assert schedule.due_time(NOW, delay=None, deliver_at=None, default_delay=45) == NOW + secs(45)


def test_due_time_past_deliver_at_is_now():
    assert schedule.due_time(NOW, delay=None, deliver_at=NOW - timedelta(days=1), default_delay=99) == NOW


# --- buckets, shards, sort keys --------------------------------------------------------------


def test_bucket_is_due_time_divided_by_width():
    due = datetime(2026, 11, 21, 10, 0, 59, 999000, tzinfo=UTC)
    assert schedule.bucket_of(due, 60) == schedule.bucket_of(NOW, 60)
    assert schedule.bucket_of(due + timedelta(milliseconds=1), 60) == schedule.bucket_of(NOW, 60) + 1


def test_bucket_value():
    assert schedule.bucket_of(NOW, 60) == to_ms(NOW) // 60000


@pytest.mark.parametrize("shards", [1, 2, 8, 13])
def test_shard_is_in_range(shards):
    assert all(0 <= schedule.shard_of(f"id-{i}", shards) < shards for i in range(200))


def test_shard_is_deterministic():
    assert schedule.shard_of("0f3a9c", 8) == schedule.shard_of("0f3a9c", 8)


def test_shards_spread_ids():
    assert len({schedule.shard_of(f"{i:032x}", 8) for i in range(200)}) == 8


def test_sort_keys_of_different_due_times_sort_in_time_order():
    early = schedule.sort_key(to_ms(NOW), "ffff")
    late = schedule.sort_key(to_ms(NOW) + 1, "0000")
    much_later = schedule.sort_key(to_ms(NOW + timedelta(days=3650)), "0000")
    assert early < late < much_later


def test_sort_key_is_13_digit_padded():
    assert schedule.sort_key(5, "abc") == "0000000000005#abc"


def test_bounds_bracket_every_key_with_that_due_time():
    ms = to_ms(NOW)
    lower = schedule.sort_key_bound(ms, upper=False)
    upper = schedule.sort_key_bound(ms, upper=True)
    for message_id in ["0", "ffffffffffffffffffffffffffffffff", "6f1d3c59-8a64-4c1e", "a" * 64]:
        assert lower < schedule.sort_key(ms, message_id) < upper


def test_bounds_exclude_neighbouring_due_times():
    ms = to_ms(NOW)
    assert schedule.sort_key(ms - 1, "f" * 32) < schedule.sort_key_bound(ms, upper=False)
    assert schedule.sort_key_bound(ms, upper=True) < schedule.sort_key(ms + 1, "0")


def test_sweep_keys_combine_bucket_shard_and_sort_key():
    due = NOW + secs(90)
    keys = schedule.sweep_keys("abc", due, shards=8, bucket_seconds=60)
    assert keys.pk == f"{to_ms(due) // 60000}#{schedule.shard_of('abc', 8)}"
    assert keys.sk == f"{to_ms(due):013d}#abc"


def test_buckets_between_is_inclusive():
    start = to_ms(NOW)
    assert list(schedule.buckets_between(start, start + 120_000, 60)) == [
        start // 60000,
        start // 60000 + 1,
        start // 60000 + 2,
    ]


def test_buckets_between_same_bucket():
    start = to_ms(NOW)
    assert list(schedule.buckets_between(start, start + 59_999, 60)) == [start // 60000]


# --- hand-off, timers, leases ----------------------------------------------------------------


def test_hands_off_at_the_window_boundary():
    assert schedule.hands_off_now(NOW + secs(330), NOW, 300, 30) is True


def test_does_not_hand_off_just_past_the_window():
    assert schedule.hands_off_now(NOW + secs(330) + timedelta(milliseconds=1), NOW, 300, 30) is False


def test_hands_off_past_due_messages():
    assert schedule.hands_off_now(NOW - secs(10), NOW, 300, 30) is True


def test_hand_off_window_never_exceeds_sqs_maximum_delay():
    assert schedule.hands_off_now(NOW + secs(901), NOW, 900, 30) is False
    assert schedule.hands_off_now(NOW + secs(900), NOW, 900, 30) is True


def test_timer_delay_floors_and_keeps_a_one_second_head_start():
    assert schedule.timer_delay(NOW + secs(10.9), NOW) == 9


def test_timer_delay_whole_seconds():
    assert schedule.timer_delay(NOW + secs(10), NOW) == 9


def test_timer_delay_is_capped_at_900():
    assert schedule.timer_delay(NOW + secs(5000), NOW) == 900


@pytest.mark.parametrize("offset", [0, 0.5, 1, -60])
def test_timer_delay_is_never_negative(offset):
    assert schedule.timer_delay(NOW + secs(offset), NOW) == 0


def test_claim_lease_runs_past_a_future_due_time():
    due = NOW + secs(100)
    assert schedule.claim_lease(due, NOW) == due + secs(schedule.LEASE_AFTER_DUE)


def test_claim_lease_counts_from_now_for_overdue_messages():
    assert schedule.claim_lease(NOW - secs(500), NOW) == NOW + secs(schedule.LEASE_AFTER_DUE)


def test_claim_lease_ends_after_due_time():
    due = NOW + secs(30)
    assert schedule.claim_lease(due, NOW) > due


def test_recovery_sweep_trails_now_by_more_than_the_lease():
    assert schedule.recovery_sweep_end(NOW) < to_ms(NOW - secs(schedule.LEASE_AFTER_DUE))


def test_main_sweep_end_is_now_plus_lookahead():
    assert schedule.main_sweep_end(NOW, 300) == to_ms(NOW) + 300_000


def test_is_early_boundary():
    assert schedule.is_early(NOW + secs(3), NOW) is False
    assert schedule.is_early(NOW + secs(3.001), NOW) is True


def test_seconds_until_is_never_negative():
    assert schedule.seconds_until(NOW - secs(5), NOW) == 0.0
    assert schedule.seconds_until(NOW + secs(2.5), NOW) == 2.5
