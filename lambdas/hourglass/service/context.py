"""What a service needs at run time: settings, adapters, a clock and a sleeper, built once."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hourglass import logs
from hourglass.adapters import http_target, storage
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.metric_reader import CloudWatchSeries
from hourglass.adapters.metrics import Metrics
from hourglass.adapters.service_targets import ServiceTargets
from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.core.charts import SeriesReader
from hourglass.core.due_width import Widths
from hourglass.core.handoff import Claim, DueEntry
from hourglass.core.model import Message
from hourglass.core.schedule import SweepKeys
from hourglass.service.due_widths import DueWidths
from hourglass.service.give_way import give_way
from hourglass.service.handoff import HandOff
from hourglass.service.pacing import Pacer
from hourglass.service.queue_limits import QueueLimits
from hourglass.service.spreading import Spreading
from hourglass.settings import Settings


def utc_now() -> datetime:
    return datetime.now(UTC)


# The parts the hand-off is built from: replacing one (tests change settings on a running context) builds it again.
HANDOFF_PARTS = frozenset({"settings", "store", "timers", "metrics", "pacer", "bucket_widths"})


@dataclass
class Context:
    settings: Settings
    store: storage.Storage
    timers: TimerQueue
    targets: SqsTargets
    metrics: Metrics = field(default_factory=Metrics)
    # Lambda, SNS, EventBridge and Step Functions targets (their clients built on first use).
    services: ServiceTargets = field(default_factory=ServiceTargets)
    clock: Callable[[], datetime] = utc_now
    sleep: Callable[[float], None] = time.sleep
    post: Callable[..., http_target.HttpReply] = http_target.post
    check_url: Callable[..., None] = http_target.check_url
    # Asynchronous fan-out invocation of the sweeper function (bulk operations); None: the request does the work itself.
    invoke_fanout: Callable[[dict[str, Any]], None] | None = None
    # Where the console's charts read a queue's figures over time (`GET .../metrics`).
    metric_series: SeriesReader = field(default_factory=CloudWatchSeries)
    # The S3 body store; by default built from settings.body_bucket on first use.
    body_store: BodyStore | None = None
    # The due-bucket widths this process places index entries at; None: fresh ones at the settings' shards.
    bucket_widths: Widths | None = None
    # Rate-limit pacing (shared by every hand-off of this process) and the sweeper's view of limits.
    pacer: Pacer = field(init=False)
    limits: QueueLimits = field(init=False)
    # This process's tally of new messages per queue, which spreads a busy one (`core/message_partitions.py`).
    spreading: Spreading = field(init=False)

    def __post_init__(self) -> None:
        self.pacer = Pacer(self.store)
        self.limits = QueueLimits(self.store.get_queue, lambda: self.clock(), self._has_schedules)
        self.spreading = Spreading(self.store)
        if self.settings.log_level is not None:
            logs.set_level(self.settings.log_level)
        # Bodies above the body-item threshold go to S3; its client is built on first use.
        configure = getattr(self.store, "configure_bodies", None)
        if configure is not None:
            configure(retention=self.settings.retention, bucket=self.settings.body_bucket, body_store=self.body_store)

    def _has_schedules(self, queue: str) -> bool:
        return bool(self.store.list_schedules(queue, limit=1, cursor=None)[0])

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name in HANDOFF_PARTS:
            self.__dict__.pop("handoff", None)

    @functools.cached_property
    def handoff(self) -> HandOff:
        """This process's hand-off, built on first use (and again after a part of it is replaced)."""
        return HandOff(
            self.timers,
            self.settings.timing,
            release=self._release,
            claim=self._claim,
            metrics=self.metrics,
            pacer=self.pacer,
            clock=lambda: self.clock(),
            give_way=functools.partial(give_way, self.store, self.settings),
            widths=DueWidths(
                self.store,
                self.bucket_widths or Widths(self.settings.shards),
                self.settings.bucket_seconds,
                lambda: self.clock(),
            ),
        )

    # The store's claim and release as they are at each call (tests wrap them on a running context).
    def _release(self, claim: Claim) -> None:
        self.store.release(claim)

    def _claim(
        self, entry: DueEntry, *, now: datetime, lease_until: datetime, move_to: SweepKeys | None = None
    ) -> Message | None:
        return self.store.claim(entry, now=now, lease_until=lease_until, move_to=move_to)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> Context:
        parts: dict[str, object] = {
            "store": Store(settings.table),
            "timers": TimerQueue(settings.timer_queue_url),
            "targets": SqsTargets(),
        }
        parts.update(overrides)
        return cls(settings=settings, **parts)  # type: ignore[arg-type]
