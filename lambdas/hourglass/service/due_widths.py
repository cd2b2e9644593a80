"""A process's due-bucket widths kept with the buckets' records: it counts the entries it places and widens a
bucket only after its record holds the new width, so a sweep that reads the record reads every shard written."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime

from hourglass.adapters import storage
from hourglass.core.due_width import Widths, record_expiry
from hourglass.core.keys import bucket_of_pk
from hourglass.core.schedule import SweepKeys
from hourglass.errors import StoreError
from hourglass.logs import log

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.BucketWidths


class DueWidths:
    def __init__(self, store: StorageUsed, widths: Widths, bucket_seconds: int, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.widths = widths
        self.bucket_seconds = bucket_seconds
        self._lock = threading.Lock()

    def placed(self, keys: Iterable[SweepKeys | None]) -> bool:
        """Counts entries about to be written; every FLUSH of them into one bucket (EARLY within a second) adds to
        its record (one write), and a bucket whose entries need more shards (or that follows a wider one) is
        widened (one conditional write) before any goes there. Whether a bucket was widened: the entries are
        better placed again."""
        buckets = Counter(bucket_of_pk(k.pk) for k in keys if k is not None)
        widened = False
        with self._lock:
            for bucket, entries in buckets.items():
                if bucket is None:
                    continue
                inherited = self.widths.inherited(bucket)
                if inherited is not None:
                    widened |= self._widen(bucket, inherited)
                due = self.widths.count(bucket, entries, self.clock())
                if due is not None:
                    widened |= self._record(bucket, due)
        return widened

    def _record(self, bucket: int, entries: int) -> bool:
        try:
            now = self.clock()
            expire_at = record_expiry(bucket, self.bucket_seconds)
            record = self.store.add_bucket_writes(bucket, entries, now=now, expire_at=expire_at)
        except StoreError as exc:
            log("bucket_width_not_recorded", bucket=bucket, error=str(exc))
            return False
        wider = self.widths.learned(bucket, record, now)
        return wider is not None and self._widen(bucket, wider)

    def _widen(self, bucket: int, width: int) -> bool:
        try:
            self.store.widen_bucket(bucket, width, expire_at=record_expiry(bucket, self.bucket_seconds))
        except StoreError as exc:
            # The bucket stays as wide as it was: its entries only share fewer partitions.
            log("bucket_width_not_recorded", bucket=bucket, error=str(exc))
            return False
        self.widths.widen(bucket, width)
        return True
