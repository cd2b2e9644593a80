"""Due-bucket widths: how wide a bucket gets for what is written into it, and what a process places at."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hourglass.core import due_width, schedule
from hourglass.core.due_width import Record, Widths

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_bucket_stays_at_the_deployments_shards_until_they_hold_their_share():
    assert due_width.width_for(8 * due_width.PER_SHARD, 8) == 8


def test_a_bucket_doubles_until_its_shards_take_its_rate():
    assert due_width.width_for(0, 8, rate=10_000) == 64


def test_a_bucket_doubles_until_its_shards_hold_what_was_written():
    assert due_width.width_for(8 * due_width.PER_SHARD + 1, 8) == 16
    assert due_width.width_for(100 * due_width.PER_SHARD, 8) == 128


def test_a_bucket_is_never_wider_than_its_cap():
    assert due_width.width_for(10**9, 8) == 8 * due_width.MAX_FACTOR


def test_an_entry_stays_under_its_base_shard_at_every_width():
    ids = [uuid.uuid4().hex for _ in range(500)]
    for width in (8, 16, 64, 512):
        assert all(schedule.shard_of(i, width) % 8 == schedule.shard_of(i, 8) for i in ids)


def test_a_base_shard_reads_its_own_partitions_of_a_wider_bucket():
    assert list(due_width.shards_under(3, 8, 32)) == [3, 11, 19, 27]


def test_a_base_shard_reads_only_itself_in_a_bucket_without_a_record():
    assert list(due_width.shards_under(3, 8, 0)) == [3]


def test_a_process_counts_entries_until_a_flush_is_due():
    widths = Widths(8, flush=100)
    later = [T0 + timedelta(seconds=s) for s in (0, 5, 10)]
    assert [widths.count(7, 60, later[0]), widths.count(7, 60, later[1]), widths.count(7, 10, later[2])] == [
        None,
        120,
        None,
    ]


def answered(bucket: int) -> Widths:
    """A process that has added to `bucket`'s record once already."""
    widths = Widths(8)
    widths.learned(bucket, Record(100, None, T0 - timedelta(seconds=1)), T0 - timedelta(seconds=1))
    return widths


def test_a_bucket_filling_fast_is_added_to_its_record_early():
    widths = answered(7)
    counted = [widths.count(7, 100, T0 + timedelta(seconds=0.1 * i)) for i in range(3)]
    assert counted == [None, None, 300]


def test_a_bucket_filling_slowly_waits_for_a_full_flush():
    widths = answered(7)
    counted = [widths.count(7, 100, T0 + timedelta(seconds=2 * i)) for i in range(10)]
    assert counted == [None] * 9 + [1_000]


def test_a_full_post_into_a_bucket_without_an_answer_is_added_to_its_record_at_once():
    assert Widths(8).count(7, due_width.FIRST, T0) == due_width.FIRST


def test_a_smaller_post_into_a_bucket_without_an_answer_waits():
    assert Widths(8).count(7, due_width.FIRST - 1, T0) is None


def test_a_bucket_is_widened_for_the_rate_its_record_grew_at():
    widths = Widths(8)
    widths.learned(7, Record(1_000, None, T0 - timedelta(seconds=60)), T0)
    assert widths.learned(7, Record(4_000, None, T0 - timedelta(seconds=60)), T0 + timedelta(seconds=1)) == 16


def test_a_bucket_is_widened_for_its_average_rate_at_the_first_answer():
    assert Widths(8).learned(7, Record(3_000, None, T0), T0 + timedelta(seconds=1)) == 16


def test_a_process_adopts_a_width_another_recorded():
    widths = Widths(8)
    assert widths.learned(7, Record(10, 64, T0), T0) is None
    assert widths.width(7) == 64


def test_a_process_asks_for_a_wider_bucket_without_placing_there_yet():
    widths = Widths(8, per_shard=10)
    assert widths.learned(7, Record(1_000, None, T0 - timedelta(seconds=60)), T0) == 128
    assert widths.width(7) == 8


def test_a_width_never_narrows():
    widths = Widths(8)
    widths.widen(7, 32)
    widths.widen(7, 16)
    assert widths.width(7) == 32


def test_a_buckets_record_outlives_the_bucket_by_a_week():
    assert due_width.record_expiry(100, 60) == 101 * 60 + 7 * 86_400


def test_a_process_starts_a_bucket_as_wide_as_the_one_before():
    widths = Widths(8)
    widths.widen(7, 64)
    assert widths.inherited(8) == 64


def test_a_bucket_after_one_at_the_deployments_shards_inherits_nothing():
    assert Widths(8).inherited(8) is None


def test_a_bucket_already_written_inherits_nothing():
    widths = Widths(8)
    widths.widen(7, 64)
    widths.count(8, 1, T0)
    assert widths.inherited(8) is None
