"""The one DynamoDB table: messages (`message_storage`), sweep bookkeeping (`sweep_storage`), schedules,
operations, delivery control (`control_storage`) and the queue list (`queue_registry`)."""

from __future__ import annotations

from hourglass.adapters.breaker_storage import BreakerStorage
from hourglass.adapters.concurrency_storage import ConcurrencyStorage
from hourglass.adapters.control_storage import ControlStorage
from hourglass.adapters.message_storage import MessageStorage
from hourglass.adapters.operation_storage import OperationStorage
from hourglass.adapters.pacing_storage import PacingStorage
from hourglass.adapters.queue_lifetime import QueueLifetime
from hourglass.adapters.queue_notice_storage import QueueNoticeStorage
from hourglass.adapters.queue_registry import QueueRegistry
from hourglass.adapters.schedule_storage import ScheduleStorage
from hourglass.adapters.sweep_storage import SweepStorage


class Store(
    MessageStorage,
    SweepStorage,
    OperationStorage,
    ConcurrencyStorage,
    PacingStorage,
    ControlStorage,
    ScheduleStorage,
    QueueRegistry,
    QueueLifetime,
    BreakerStorage,
    QueueNoticeStorage,
):
    """Both nouns over one table and one client, as the services and the local runtime use it."""
