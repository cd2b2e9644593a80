"""The width of a due bucket: how many shard partitions its index entries are spread over, grown with what is written.

A bucket starts at the deployment's `shards` (the fixed layout before widths existed, so older entries stay
where the sweep looks) and doubles as its entries grow; every width is `shards · 2^k`, so an entry's shard in
any width falls under the same base shard (`crc32 % shards`), the unit the sweep's fan-out splits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Entries one shard partition of a bucket holds before the bucket widens. A bucket's entries are removed in
# the bucket's own `bucket_seconds` (their deliveries start), so a full shard takes 500 / 60 ≈ 8 removals a
# second; writes into a bucket widen it within about FLUSH x processes entries of the rate that needs it, and
# a process starts the next bucket as wide as the one before (steady traffic at a fixed delay fills bucket
# after bucket at the same rate).
PER_SHARD = 500
# Writes one process counts into a bucket before it adds them to the bucket's record (one write): a process
# writing fewer into a bucket (10 messages/s into 60 s buckets is 600) never writes the record.
FLUSH = 1_000
# The widest a bucket gets, in multiples of `shards` (8 x 64 = 512 partitions for the stack's default).
MAX_FACTOR = 64
# Buckets a process remembers; the oldest (lowest) are forgotten first.
REMEMBERED = 4_096


def width_for(written: int, shards: int, per_shard: int = PER_SHARD) -> int:
    """The smallest `shards · 2^k` (at most `shards · MAX_FACTOR`) holding `written` entries at `per_shard` a shard."""
    width = shards
    while written > width * per_shard and width < shards * MAX_FACTOR:
        width *= 2
    return width


def shards_under(base: int, shards: int, width: int) -> range:
    """The shards of a bucket of `width` whose entries belong to base shard `base` (what its sweep reads)."""
    return range(base, max(width, shards), shards)


@dataclass
class Widths:
    """One process's view of the buckets it writes into: the width it places entries at (never beyond what the
    bucket's record holds) and the writes it has counted but not yet added to the record."""

    shards: int
    per_shard: int = PER_SHARD
    flush: int = FLUSH
    widths: dict[int, int] = field(default_factory=dict)
    pending: dict[int, int] = field(default_factory=dict)

    def width(self, bucket: int) -> int:
        return self.widths.get(bucket, self.shards)

    def inherited(self, bucket: int) -> int | None:
        """For a bucket this process has not written into yet: the width of the one before, if it is wider."""
        if bucket in self.widths or bucket in self.pending:
            return None
        before = self.width(bucket - 1)
        return before if before > self.shards else None

    def count(self, bucket: int, entries: int = 1) -> int | None:
        """Counts entries placed into `bucket`; returns how many to add to its record when that is due."""
        pending = self.pending.get(bucket, 0) + entries
        if pending < self.flush:
            self.pending[bucket] = pending
            self._forget()
            return None
        self.pending.pop(bucket, None)
        return pending

    def learned(self, bucket: int, written: int, recorded: int | None) -> int | None:
        """What the record answered (entries written into the bucket by every process, the width it holds):
        adopts the recorded width; returns a wider one to record first when the entries need it."""
        self.widen(bucket, recorded or self.shards)
        needed = width_for(written, self.shards, self.per_shard)
        return needed if needed > self.width(bucket) else None

    def widen(self, bucket: int, width: int) -> None:
        """Places entries at `width` from now on: only once a record holds at least that width."""
        if width > self.width(bucket):
            self.widths[bucket] = width
            self._forget()

    def _forget(self) -> None:
        for known in (self.pending, self.widths):
            while len(known) > REMEMBERED:
                del known[min(known)]


# How long a bucket's record outlives the bucket: a recovery sweep (a sweeper down for days) still reads its width.
RECORD_KEPT_SECONDS = 7 * 86_400


def record_expiry(bucket: int, bucket_seconds: int) -> int:
    """When the table's TTL may remove a bucket's record (epoch seconds)."""
    return (bucket + 1) * bucket_seconds + RECORD_KEPT_SECONDS
