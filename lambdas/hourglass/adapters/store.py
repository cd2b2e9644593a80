"""The one implementation of the storage contract (`adapters.storage`): one DynamoDB table and one S3 bucket, a
mixin per kind of item, each mapping its items (`adapters.items`) to the nouns' methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hourglass.adapters.attempt_storage import AttemptStorage
from hourglass.adapters.breaker_storage import BreakerStorage
from hourglass.adapters.concurrency_storage import ConcurrencyStorage
from hourglass.adapters.message_storage import MessageStorage
from hourglass.adapters.operation_storage import OperationStorage
from hourglass.adapters.ordering_storage import OrderingStorage
from hourglass.adapters.pacing_storage import PacingStorage
from hourglass.adapters.queue_lifetime import QueueLifetime
from hourglass.adapters.queue_notice_storage import QueueNoticeStorage
from hourglass.adapters.queue_registry import QueueRegistry
from hourglass.adapters.queue_storage import QueueStorage
from hourglass.adapters.schedule_storage import ScheduleStorage
from hourglass.adapters.sweep_storage import SweepStorage

if TYPE_CHECKING:
    from hourglass.adapters.storage import Storage


class Store(
    QueueStorage,
    MessageStorage,
    SweepStorage,
    OperationStorage,
    ConcurrencyStorage,
    OrderingStorage,
    PacingStorage,
    AttemptStorage,
    ScheduleStorage,
    QueueRegistry,
    QueueLifetime,
    BreakerStorage,
    QueueNoticeStorage,
):
    """Every noun of `adapters.storage.Storage` over one table and one client."""


if TYPE_CHECKING:

    def _keeps_the_contract(store: Store) -> Storage:
        """mypy checks here that `Store` has every method of every noun, with signatures that fit."""
        return store
