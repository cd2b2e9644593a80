"""The width of a due bucket: how many shard partitions its index entries are spread over, grown with what is written.

A bucket starts at the deployment's `shards` (the fixed layout before widths existed, so older entries stay
where the sweep looks) and doubles as its entries grow; every width is `shards · 2^k`, so an entry's shard in
any width falls under the same base shard (`crc32 % shards`), the unit the sweep's fan-out splits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hourglass.core.validation import MAX_BATCH

# Entries one shard partition of a bucket holds before the bucket widens. A bucket's entries are removed in
# the bucket's own `bucket_seconds` (their deliveries start), so a full shard takes 500 / 60 ≈ 8 removals a
# second; writes into a bucket widen it within about FLUSH x processes entries of the rate that needs it, and
# a process starts the next bucket as wide as the one before (steady traffic at a fixed delay fills bucket
# after bucket at the same rate).
PER_SHARD = 500
# Writes one process counts into a bucket before it adds them to the bucket's record (one write): a process
# writing fewer into a bucket (10 messages/s into 60 s buckets is 600) never writes the record.
FLUSH = 1_000
# ... or sooner, when this many went into one bucket within EARLY_WINDOW (a bucket filling fast): 250 in a
# second from one process is more than 10 messages/s of everything together.
EARLY = 250
EARLY_WINDOW = timedelta(seconds=1)
# ... and at once when a process puts a full POST's worth into a bucket it has had no answer for: in a burst
# from idle, every process's first POST lands in the same cold bucket, and learning its width then, not at the
# third POST, keeps the busiest shard under a partition's limit at 100,000/s (2,865 -> 449 writes in its first
# second, bench capacity_items). At a low rate it costs a record write per process and bucket, if any.
FIRST = MAX_BATCH
# Writes a second one shard takes before the bucket widens: a quarter of a partition's 1,000, for the
# records' lag (a process adds its count only every EARLY or FLUSH entries).
RATE_PER_SHARD = 250
# The shortest span a rate is taken over (seconds): a bucket's first answers come fractions of a second apart,
# and a rate over-estimated from them only widens the bucket more than it needs (more, emptier partitions).
RATE_SPAN = 0.1
# The widest a bucket gets, in multiples of `shards` (8 x 64 = 512 partitions for the stack's default).
MAX_FACTOR = 64
# Buckets a process remembers; the oldest (lowest) are forgotten first.
REMEMBERED = 4_096


def width_for(written: int, shards: int, per_shard: int = PER_SHARD, rate: float = 0.0) -> int:
    """The smallest `shards · 2^k` (at most `shards · MAX_FACTOR`) holding `written` entries at `per_shard` a
    shard and taking writes at `rate` a second at RATE_PER_SHARD a shard."""
    width = shards
    while (written > width * per_shard or rate > width * RATE_PER_SHARD) and width < shards * MAX_FACTOR:
        width *= 2
    return width


def shards_under(base: int, shards: int, width: int) -> range:
    """The shards of a bucket of `width` whose entries belong to base shard `base` (what its sweep reads)."""
    return range(base, max(width, shards), shards)


@dataclass(frozen=True)
class Record:
    """A bucket's record as a write into it answered: entries written by every process, its width, and when the
    first of them was added (so the average rate since)."""

    written: int
    width: int | None
    since: datetime


@dataclass
class _Count:
    """Entries a process placed into a bucket and has not added to its record; those of the current window."""

    pending: int
    window: datetime
    recent: int


@dataclass
class Widths:
    """One process's view of the buckets it writes into: the width it places entries at (never beyond what the
    bucket's record holds), the writes it has counted but not yet added to the record, and the record's last
    answer (when, and how many entries in all), from which the next answer's growth gives the bucket's rate."""

    shards: int
    per_shard: int = PER_SHARD
    flush: int = FLUSH
    early: int = EARLY
    first: int = FIRST
    widths: dict[int, int] = field(default_factory=dict)
    counts: dict[int, _Count] = field(default_factory=dict)
    answers: dict[int, tuple[datetime, int]] = field(default_factory=dict)

    def width(self, bucket: int) -> int:
        return self.widths.get(bucket, self.shards)

    def inherited(self, bucket: int) -> int | None:
        """For a bucket this process has not written into yet: the width of the one before, if it is wider."""
        if bucket in self.widths or bucket in self.counts or bucket in self.answers:
            return None
        before = self.width(bucket - 1)
        return before if before > self.shards else None

    def count(self, bucket: int, entries: int, now: datetime) -> int | None:
        """Counts entries placed into `bucket`; returns how many to add to its record when that is due."""
        count = self.counts.get(bucket) or _Count(0, now, 0)
        if now - count.window > EARLY_WINDOW:
            count.window, count.recent = now, 0
        count.pending += entries
        count.recent += entries
        early = self.early if bucket in self.answers else self.first
        if count.pending < self.flush and count.recent < early:
            self.counts[bucket] = count
            self._forget()
            return None
        self.counts.pop(bucket, None)
        return count.pending

    def learned(self, bucket: int, record: Record, now: datetime) -> int | None:
        """What the record answered: adopts the recorded width; returns a wider one to record first when the
        entries, or the rate they come at, need it. The rate: the record's growth since the last answer this
        process had, or its average since its first entry (over at least RATE_SPAN)."""
        self.widen(bucket, record.width or self.shards)
        since, before = self.answers.get(bucket, (record.since, 0))
        rate = (record.written - before) / max((now - since).total_seconds(), RATE_SPAN)
        self.answers[bucket] = (now, record.written)
        self._forget()
        needed = width_for(record.written, self.shards, self.per_shard, rate)
        return needed if needed > self.width(bucket) else None

    def widen(self, bucket: int, width: int) -> None:
        """Places entries at `width` from now on: only once a record holds at least that width."""
        if width > self.width(bucket):
            self.widths[bucket] = width
            self._forget()

    def _forget(self) -> None:
        _trim(self.counts)
        _trim(self.widths)
        _trim(self.answers)


def _trim(known: dict[int, Any]) -> None:
    while len(known) > REMEMBERED:
        del known[min(known)]


# How long a bucket's record outlives the bucket: a recovery sweep (a sweeper down for days) still reads its width.
RECORD_KEPT_SECONDS = 7 * 86_400


def record_expiry(bucket: int, bucket_seconds: int) -> int:
    """When the table's TTL may remove a bucket's record (epoch seconds)."""
    return (bucket + 1) * bucket_seconds + RECORD_KEPT_SECONDS
