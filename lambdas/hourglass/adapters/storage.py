"""The storage contract: one Protocol per noun, each a short documented list of methods. A service module depends on
the nouns it uses (its `StorageUsed`); `adapters.store.Store` is the one implementation (DynamoDB and S3), whose
mixins only map items."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import Item as TableItem
from hourglass.adapters.message_storage import CountBatch
from hourglass.adapters.operation_storage import Cursor
from hourglass.core import pacing
from hourglass.core.attempts import Attempt
from hourglass.core.body_placement import BodyLimits
from hourglass.core.circuit_breaker import Tally
from hourglass.core.concurrency import Lease
from hourglass.core.due_width import Record
from hourglass.core.failure_notice import QueuePaused
from hourglass.core.handoff import Claim, DueEntry, Scheduled
from hourglass.core.lifecycle import Change, DeliveryStart
from hourglass.core.model import Message, Notice, NoticeStatus, Queue, Status
from hourglass.core.operations import Operation, Progress, Workers
from hourglass.core.ordering import KeyState, Spilled, Waiter
from hourglass.core.pacing import PaceState
from hourglass.core.recurrence import Schedule
from hourglass.core.repair_round import RepairRound
from hourglass.core.schedule import SweepKeys
from hourglass.core.sweep_state import ShardProgress, SweepState
from hourglass.core.validation import ListOrder

# Rules every implementation keeps:
# - a conditional write that loses writes nothing and raises StaleVersionError, unless its method says it returns
#   False or None instead;
# - any other failure of the backend raises StoreError (a 503), never a wrong answer;
# - times are aware UTC datetimes, or epoch milliseconds or microseconds where a name says so (`_ms`, `_us`).


class Queues(Protocol):
    """Queue items: one per queue name, its settings and pause flag, written on the version read."""

    def get_queue(self, name: str, *, consistent: bool = False) -> Queue | None: ...

    def put_queue(self, queue: Queue) -> bool:
        """Create or replace whatever is stored (seeding); True when it was created."""
        ...

    def write_queue(self, queue: Queue, *, expected_version: int | None) -> None:
        """Create (`expected_version` None: only if absent) or replace the version read; else StaleVersionError."""
        ...

    def set_paused(self, name: str, paused: bool, now: datetime | None = None) -> Queue:
        """Pause or resume (a resume at `now` starts the breaker's fresh window); NotFoundError when absent."""
        ...

    def delete_queue(self, name: str, epoch: datetime | None = None) -> bool:
        """Delete the queue item (with `epoch`, only that life of it); False when there was none."""
        ...


class QueueSpread(Protocol):
    """A busy queue's spread (`core/message_partitions.py`): the window records of its messages, and its switch."""

    def add_to_window(self, name: str, window: int, count: int) -> int:
        """Adds `count` messages to the queue's record of `window`; the record's total."""
        ...

    def spread_queue(self, name: str, epoch: datetime, partitions: int) -> bool:
        """The queue's life `epoch` spreads its new messages over `partitions`; False when it already does, or is
        gone."""
        ...


class QueueList(Protocol):
    """The list of queue names, so listing queues is one Query."""

    def register_queue(self, name: str) -> None:
        """Written before the queue item: a name whose queue is missing is skipped when listing."""
        ...

    def unregister_queue(self, name: str) -> None: ...

    def list_queues(self, *, limit: int, cursor: str | None) -> tuple[list[Queue], str | None]:
        """Up to `limit` queues in name order from `cursor`, and the cursor after them (None at the end)."""
        ...


class QueueLives(Protocol):
    """When each life of a queue name ended, and what a life leaves besides its messages."""

    def end_queue(self, name: str, at: datetime) -> None:
        """The queue's life ended at `at`: noted, and what it left removed."""
        ...

    def queue_ended_at(self, name: str) -> datetime | None: ...

    def clear_queue_items(self, name: str, prefixes: Sequence[str] = ...) -> None:
        """Delete the items of `prefixes` (pacing, slots, schedules, operations) under the queue's name."""
        ...


class Messages(Protocol):
    """Message versions stored new and read back, with their bodies (inline, a body item or S3)."""

    def put_messages(self, entries: Iterable[tuple[Message, SweepKeys | None]]) -> None:
        """Store new messages (with due-index keys, or None: handed off already), unconditionally."""
        ...

    def put_with_dedup(
        self,
        message: Message,
        keys: SweepKeys | None,
        *,
        now: datetime,
        window: timedelta,
        sleep: Callable[[float], None] = ...,
    ) -> str | None:
        """Store `message` unless its dedup id was used within `window` in this queue's life; then the first id."""
        ...

    def put_occurrence(self, message: Message, keys: SweepKeys | None) -> bool:
        """Store a schedule occurrence unless its id is stored already; True when this call stored it."""
        ...

    def get_message(self, queue: str, message_id: str, *, consistent: bool = True) -> Message | None: ...

    def list_messages(
        self,
        queue: str,
        *,
        status: Status | None,
        limit: int,
        cursor: str | None,
        schedule: str | None = None,
        notice: NoticeStatus | None = None,
        flow_key: str | None = None,
        order: ListOrder | None = None,
        partitions: int = 1,
    ) -> tuple[list[Message], str | None]:
        """A page of up to `limit` messages (it may come back short, with a cursor) and the cursor after it, from
        every partition the queue's messages are in (`partitions`, the queue's)."""
        ...

    def read_bodies(self, messages: list[Message]) -> list[Message]:
        """`messages` with their bodies read (body items at once, S3 bodies one call each)."""
        ...


class MessageChanges(Protocol):
    """The conditional write of a message's next version (`core.lifecycle.Change`): StaleVersionError when the
    stored version is no longer the one the change was made from. `last_op`: the bulk operation writing it."""

    def begin_delivery(self, queue: str, message_id: str, start: DeliveryStart) -> Message:
        """pending -> delivering with a lease and one more attempt (or take over an expired lease)."""
        ...

    def await_retry(
        self,
        change: Change,
        keys: SweepKeys | None,
        *,
        last_op: str | None = None,
        fences: Sequence[dict[str, Any]] = (),
    ) -> Message:
        """Pending again (a retry, a new due time, a redelivery); `fences`: other items' conditional updates in
        the same transaction (`PaceWindows.held_fence`)."""
        ...

    def reschedule(
        self, change: Change, keys: SweepKeys | None, *, new_body: bool = False, last_op: str | None = None
    ) -> Message:
        """A new due time, body or settings; with `new_body` the body is written as the next version first."""
        ...

    def cancel(self, change: Change, *, last_op: str | None = None) -> Message: ...

    def finish(self, change: Change, outbox: SweepKeys | None = None, *, last_op: str | None = None) -> Message:
        """The final write; `outbox`: due-index keys of a failure notice still to send, in the same write."""
        ...


class Bodies(Protocol):
    """Where bodies go: the retention of finished messages and the S3 bucket (configured once per process)."""

    def configure_bodies(self, *, retention: timedelta, bucket: str | None = None, body_store: Any = None) -> None: ...

    @property
    def body_limits(self) -> BodyLimits: ...

    @property
    def bodies(self) -> BodyStore: ...

    def new_items(self, message: Message, keys: SweepKeys | None) -> list[TableItem]:
        """The items storing a new message writes (its S3 body put first), for a writer that batches its own."""
        ...


class Counters(Protocol):
    """Per-status message counts of each queue life, kept as sharded counters the message writes add to."""

    def counts(self, queue: Queue) -> dict[str, int]: ...

    def count_new(self, messages: Iterable[Message]) -> None:
        """Count stored new messages (for a writer that batches its own puts)."""
        ...

    def counts_batched(self) -> contextlib.AbstractContextManager[CountBatch]:
        """A batch the calling thread's status changes add to, written every few seconds and when it ends."""
        ...

    def counting_into(self, batch: CountBatch) -> contextlib.AbstractContextManager[None]:
        """The calling thread's status changes go to `batch` while inside."""
        ...

    def flush_counts(self, batch: CountBatch) -> None: ...


class Notices(Protocol):
    """Failure notices still owed, in the outbox: a message's (on its item) and a queue's (`queue.paused`)."""

    def record_notice(self, message: Message, notice: Notice) -> bool:
        """A failed try: the entry moves to its next try (or leaves, abandoned); False when the item moved on."""
        ...

    def clear_notice(self, queue: str, message_id: str, version: int) -> None:
        """The notice of this version is sent: its outbox entry leaves the due index."""
        ...

    def get_queue_paused(self, queue: str, notice_id: str) -> QueuePaused | None: ...

    def record_queue_paused(self, paused: QueuePaused) -> bool:
        """A failed try: the notice's next try replaces the version before; False when that one is gone."""
        ...

    def clear_queue_paused(self, paused: QueuePaused) -> None:
        """Sent (or given up): the item goes, unless another try moved it on meanwhile."""
        ...


class DueIndex(Protocol):
    """The due index the sweep reads, and the claims that take a due message for hand-off."""

    def query_due(self, pk: str, low: str, high: str, *, limit: int = 500) -> Iterator[DueEntry]: ...

    def indexed_buckets(self) -> set[int]:
        """Every bucket holding an entry (a first sweep covers everything ever indexed)."""
        ...

    def claim(
        self, entry: DueEntry, *, now: datetime, lease_until: datetime, move_to: SweepKeys | None = None
    ) -> Message | None:
        """The message as claimed for hand-off, or None when another has it or it changed."""
        ...

    def release(self, claim: Claim) -> None:
        """Give a claim back (its timer was not sent) so the next sweep takes it at once."""
        ...

    def due_entries(self, pk: str) -> Iterator[DueEntry]:
        """Every entry of one due-index partition, in due order (a rollback's check, `devstack.rollback`)."""
        ...

    def move_due_entry(self, entry: DueEntry, from_pk: str, to_pk: str) -> bool:
        """Moves an entry to another shard of its bucket unless its message changed since it was read."""
        ...


class ClaimEntry(Protocol):
    """`DueIndex.claim` as a callable (the hand-off takes the claim it is given)."""

    def __call__(
        self, entry: DueEntry, *, now: datetime, lease_until: datetime, move_to: SweepKeys | None = None
    ) -> Message | None: ...


class BucketWidths(Protocol):
    """Each due bucket's record: the entries written into it and its width (core.due_width), which only grows."""

    def bucket_width(self, bucket: int) -> int | None:
        """The width the bucket's record holds (None: no record, the bucket is at the deployment's shards)."""
        ...

    def add_bucket_writes(self, bucket: int, entries: int, *, now: datetime, expire_at: int) -> Record:
        """Adds `entries` to the bucket's count: the record as it is after (its first entry's time set if none)."""
        ...

    def widen_bucket(self, bucket: int, width: int, *, expire_at: int) -> None:
        """Records `width` unless the record holds at least that already."""
        ...

    def wide_buckets(self, alive_after: int) -> dict[int, int]:
        """Each bucket recorded wider than the deployment's shards whose record outlives `alive_after` (epoch s)."""
        ...


class SweepProgress(Protocol):
    """The sweep's watermarks and the progress of its fan-out invocations, moved forward only."""

    def load_sweep_state(self, default: SweepState) -> SweepState: ...

    def save_sweep_state(self, state: SweepState) -> None: ...

    def save_shard_progress(self, progress: Mapping[int, ShardProgress]) -> None: ...


class Operations(Protocol):
    """Bulk operations: the operation item and the list of running ones."""

    def put_operation(self, operation: Operation) -> None:
        """The new operation, running, every segment still to do (listed as running first)."""
        ...

    def get_operation(self, queue: str, operation_id: str) -> Operation | None: ...

    def running_operations(self) -> list[tuple[str, str]]:
        """(queue, operation id) of every operation listed as running."""
        ...

    def forget_operation(self, queue: str, operation_id: str) -> None:
        """Drop an operation from the running list."""
        ...

    def finish_if_done(self, queue: str, operation_id: str, now: datetime, retention: timedelta = ...) -> None:
        """Mark the operation succeeded once no segment remains, and drop it from the running list."""
        ...

    def last_op(self, queue: str, message_id: str) -> str | None:
        """The operation that last wrote the message (None when none did, or it is gone)."""
        ...


class OperationSegments(Protocol):
    """A bulk operation's segments: their cursors, pages, counters and workers' beats."""

    def operation_cursor(self, queue: str, operation_id: str, segment: int) -> tuple[bool, Cursor]:
        """Whether `segment` is still to do, and where its last recorded page ended."""
        ...

    def segment_page(
        self,
        queue: str,
        segment: int,
        statuses: frozenset[Status],
        start: Cursor,
        limit: int,
        *,
        operation_id: str,
        partitions: int = 1,
    ) -> tuple[list[tuple[Message, bool]], Cursor]:
        """One page of a segment's messages in `statuses` or written by the operation already (each with which),
        in a queue whose messages are spread over `partitions`."""
        ...

    def record_page(
        self,
        queue: str,
        operation_id: str,
        segment: int,
        pages: tuple[Cursor, Cursor],
        progress: Progress,
        *,
        now: datetime,
    ) -> bool:
        """A page's counters, cursor and beat in one write; False when another worker recorded it first."""
        ...

    def operation_workers(self, queue: str, operation_id: str) -> tuple[Operation, Workers] | None: ...

    def claim_segments(
        self, queue: str, operation_id: str, workers: Workers, segments: list[int], now: datetime
    ) -> bool:
        """Restart `segments` if their beats are still those in `workers` (one of two sweepers wins)."""
        ...


class Schedules(Protocol):
    """Recurring schedules, written on the version read, and the repair round's position."""

    def get_schedule(self, queue: str, name: str, *, consistent: bool = True) -> Schedule | None: ...

    def put_schedule(self, schedule: Schedule, *, expected_version: int | None) -> Schedule:
        """Create (`expected_version` None: only if absent) or overwrite the stored version; else StaleVersionError."""
        ...

    def delete_schedule(self, schedule: Schedule) -> None: ...

    def list_schedules(self, queue: str, *, limit: int, cursor: str | None) -> tuple[list[Schedule], str | None]: ...

    def schedule_round(self, after: str | None, limit: int) -> tuple[list[Schedule], str | None]:
        """Up to `limit` schedules of every queue after position `after`, and where to go on (None: over)."""
        ...

    def repair_position(self) -> RepairRound: ...

    def save_repair_position(self, position: RepairRound) -> None: ...


class PaceWindows(Protocol):
    """A rate-limited queue's pacing items (`core.pacing.Item`): one per window of a scope's calendar of slots,
    each with the record of who holds its slots (`core.holders`)."""

    def advance_pace(
        self, queue: str, item: pacing.Item, expected: PaceState, taken: tuple[int, ...], new_held: str | None
    ) -> tuple[bool, PaceState]:
        """Take the slots `taken` if the item is still as `expected`: whether it was written, and what it holds now
        (ours, or the winner's)."""
        ...

    def pace_windows(
        self, queue: str, scope: str | None, width_us: int, first: int, count: int
    ) -> dict[int, PaceState]:
        """The used windows of a scope among `first` .. `first + count - 1`."""
        ...

    def pace_state(self, queue: str, item: pacing.Item) -> PaceState:
        """A pacing item as it is now (read consistently)."""
        ...

    def held_fence(self, queue: str, item: pacing.Item, expected: str | None, new: str | None) -> dict[str, Any]:
        """The record's change as one action of a transaction, conditional on it being `expected`."""
        ...

    def held_room(self, queue: str, item: pacing.Item, taken: tuple[int, ...]) -> int:
        """How long the record's text may be for its item to stay within one write unit."""
        ...

    def last_window(self, queue: str, width_us: int) -> int | None:
        """The last slot taken in the queue's furthest window of this width (µs; None: none used)."""
        ...

    def reset_pace(self, queue: str) -> None:
        """Forget the queue's own slots: the next allocation starts from now."""
        ...


class ConcurrencySlots(Protocol):
    """A queue's (or flow key's) concurrency lease slots."""

    def acquire_slot(
        self,
        queue: str,
        limit: int,
        holder: str,
        until_ms: int,
        now_ms: int,
        seed: int = 0,
        flow_key: str | None = None,
        layout: int = 1,
        epoch_ms: int = 0,
    ) -> Lease | None:
        """One free slot of `limit` for `holder` until `until_ms`, or None when the probed ones are all held; in the
        queue's slot `layout` of its life `epoch_ms` (`keys.slot_pk`)."""
        ...

    def release_slot(self, queue: str, lease: Lease) -> None:
        """Free the slot if `lease`'s holder still has it (only for an attempt that leaves no outcome)."""
        ...


class KeyOrders(Protocol):
    """An ordered queue's keys (v1.3): each one's head, hold and waiting messages (`core.ordering`)."""

    def key_order(self, queue: str, flow_key: str) -> KeyState:
        """The key's state, strongly consistent (an idle key: `KeyState()`)."""
        ...

    def key_orders(self, queue: str) -> list[tuple[str, KeyState]]:
        """Every key of the queue that is not idle, with its state."""
        ...

    def save_key_order(self, queue: str, flow_key: str, state: KeyState, read: KeyState) -> bool:
        """Writes `state` over `read`; False, nothing written, when another writer changed the key since."""
        ...

    def overflow(self, queue: str, flow_key: str, limit: int | None = None) -> tuple[list[Spilled], bool]:
        """The key's overflow items in due order, the first `limit`; and whether they are all there are."""
        ...

    def overflowed(self, queue: str, flow_key: str, waiter: Waiter) -> list[Spilled]:
        """One waiter's overflow items."""
        ...

    def spill(self, queue: str, flow_key: str, waiters: Iterable[Waiter]) -> list[Spilled]:
        """Puts an overflow item for each waiter."""
        ...

    def unspill(self, queue: str, flow_key: str, entries: Iterable[Spilled]) -> None:
        """Deletes these overflow items."""
        ...


class BreakerTallies(Protocol):
    """The circuit breaker's outcome counters per queue, resume and time bucket, and its trip."""

    def count_outcome(
        self, queue: str, since: datetime | None, bucket: int, *, attempts: int, failures: int, expire_at: int
    ) -> None:
        """Adds a bucket's attempts and failures (of one dispatcher batch, or one attempt)."""
        ...

    def window_tally(self, queue: str, since: datetime | None, first: int, last: int) -> Tally:
        """The sum of the buckets first..last of the current resume."""
        ...

    def trip(self, since: datetime | None, paused: QueuePaused, *, notify: bool) -> bool:
        """Pause the running queue (and store the notice it owes) in one write; False when paused or resumed
        meanwhile, so exactly one of concurrent dispatchers trips it."""
        ...


class Attempts(Protocol):
    """A message's attempt history: one item per attempt, kept as long as the message."""

    def put_attempt(self, queue: str, attempt: Attempt, *, expire_at: datetime | None = None) -> None: ...

    def list_attempts(self, queue: str, message_id: str) -> list[Attempt]: ...

    def retain_attempts(
        self, queue: str, message_id: str, expire_at: datetime | None, *, except_attempt: int | None = None
    ) -> None:
        """Give a message's history the message's TTL (None: none); `except_attempt` was written with it."""
        ...


class Timers(Protocol):
    """The timer queue (`adapters.timer_queue.TimerQueue`, not the table): a message version's timer, sent to arrive
    at its due time or slot."""

    def send(self, items: Sequence[Scheduled]) -> list[Scheduled]:
        """Send what it can; returns the refused timers."""
        ...

    def send_all(self, items: Sequence[Scheduled]) -> None:
        """Send every timer, all or none (raises if the queue refuses any)."""
        ...


class Storage(
    Queues,
    QueueSpread,
    QueueList,
    QueueLives,
    Messages,
    MessageChanges,
    Bodies,
    Counters,
    Notices,
    DueIndex,
    BucketWidths,
    SweepProgress,
    Operations,
    OperationSegments,
    Schedules,
    PaceWindows,
    ConcurrencySlots,
    KeyOrders,
    BreakerTallies,
    Attempts,
    Protocol,
):
    """Every noun: what the services' context holds (`service.context.Context.store`)."""


# The nouns `Store` implements, in the order above (`Timers` is the timer queue's).
NOUNS: tuple[type, ...] = tuple(base for base in Storage.__bases__ if base is not Protocol)
