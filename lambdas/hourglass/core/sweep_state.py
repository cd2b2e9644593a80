"""The sweeper's bookkeeping: watermarks, the last scheduled run, and fan-out invocations' shard progress."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShardProgress:
    """How far a fan-out invocation swept one shard (every due time up to `watermark`), and what it read."""

    watermark: int
    due: int = 0
    run: int = 0
    complete: bool = True


@dataclass(frozen=True)
class SweepState:
    """The watermarks (every shard is swept up to `watermark`) and what the last scheduled run saw."""

    watermark: int
    recovery_watermark: int
    shards: Mapping[int, ShardProgress] = field(default_factory=dict)
    last_due: int = 0
    last_end: int = 0
    last_run: int = 0
    last_workers: int = 1  # fan-out invocations of the last run (the stored attribute's name)
    last_complete: bool = True

    def start_of(self, shard: int) -> int:
        """Everything in `shard` due up to this has been swept: the global or the shard's own watermark."""
        progress = self.shards.get(shard)
        return max(self.watermark, progress.watermark) if progress else self.watermark
