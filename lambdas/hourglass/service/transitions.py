"""Every change of a message's state, written once with what it decides: the failure notice, the attempt
history's TTL, and its schedule's next occurrence (chaining: at the sweep's claim of an occurrence, else after
its first outcome or its end; a sweep-time repair is the safety net).

The dispatcher, the DLQ consumer, admission, PATCH, cancel, redeliver and bulk operations all go through here;
the hand-off's giving way, which sits below `Context`, is `service.give_way`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from hourglass.adapters import storage
from hourglass.core import admission, catch_up, delivery_control, epoch, lifecycle
from hourglass.core.attempts import Attempt
from hourglass.core.handoff import Placement
from hourglass.core.lifecycle import Change
from hourglass.core.model import Message, Queue, Status
from hourglass.core.pacing import Rates
from hourglass.core.recurrence import Schedule
from hourglass.core.repair_round import RepairRound
from hourglass.core.schedule import SweepKeys
from hourglass.errors import StaleVersionError, StoreError, TimerQueueError
from hourglass.logs import log
from hourglass.service import failure_notices, ordering
from hourglass.service.context import Context
from hourglass.service.failure_notices import Owed


class StorageUsed(
    storage.Queues, storage.Messages, storage.MessageChanges, storage.Schedules, storage.Attempts, Protocol
):
    """The storage nouns this module uses (`adapters.storage`)."""


@dataclass(frozen=True)
class Chained:
    """An occurrence's schedule and queue as read before its attempt: chaining after it reads neither again.
    `stored`: its next occurrence was stored at its hand-off (`chain_ahead`), so chaining after it does nothing."""

    schedule: Schedule
    queue: Queue
    stored: bool = False


METRICS = {
    Status.DELIVERED: "Delivered",
    Status.FAILED: "Failed",
    Status.EXPIRED: "Expired",
    Status.CANCELLED: "Cancelled",
}
# Schedules the chain repair looks at per scheduled sweep: a round of N schedules takes N / this sweeps.
REPAIR_BATCH = 100


# endings ------------------------------------------------------------------------------------
def finish(
    ctx: Context,
    message: Message,
    status: Status,
    now: datetime,
    *,
    error: str | None,
    delivered_at: datetime | None = None,
    attempt: Attempt | None = None,
    read: Chained | None = None,
) -> Message:
    """The message ends in `status`; `attempt`, the attempt that ended it, rides on the same write. Raises
    StaleVersionError when another version won (the attempt, which happened, then joins the history)."""
    change = lifecycle.finish(
        message, status, now, ctx.settings.retention, error=error, delivered_at=delivered_at, attempt=attempt
    )
    try:
        return _end(ctx, message, change, now, lambda outbox: ctx.store.finish(change, outbox), read)
    except StaleVersionError:
        if attempt is not None:
            ctx.store.put_attempt(message.queue, attempt, expire_at=change.expire_at)
        raise


def cancel(ctx: Context, message: Message, now: datetime, *, operation: str | None = None) -> Message:
    """pending -> cancelled (DELETE message, bulk cancel, a stale occurrence, a deleted queue's message)."""
    change = lifecycle.cancel(message, now, ctx.settings.retention)
    return _end(ctx, message, change, now, lambda _: ctx.store.cancel(change, last_op=operation))


def revise(
    ctx: Context,
    message: Message,
    change: Change,
    placement: Placement,
    now: datetime,
    *,
    new_body: bool = False,
    operation: str | None = None,
) -> Message:
    """A `lifecycle.reschedule` (PATCH, bulk shift): pending at its new due time, handed off by the caller
    through `placement`; or, due after its expiry, expired like any other ending."""
    if change.message.status is not Status.PENDING:

        def write(outbox: SweepKeys | None) -> Message:
            return ctx.store.reschedule(change, outbox, new_body=new_body, last_op=operation)

        return _end(ctx, message, change, now, write)
    leased = change.leased(placement.lease)
    ctx.store.reschedule(leased, placement.keys, new_body=new_body, last_op=operation)
    ordering.after_reschedule(ctx, message, ctx.limits.ordering(message.queue), now)
    return leased.message


def _end(
    ctx: Context,
    before: Message,
    change: Change,
    now: datetime,
    write: Callable[[SweepKeys | None], Message],
    read: Chained | None = None,
) -> Message:
    """Writes an ending (`write` gets the outbox keys of a notice owed), then what it decides."""
    message = change.message
    notice = failure_notices.owed(ctx, message, now)
    write(notice.keys if notice else None)
    # First: the next message of its key (an ordered queue's) waits for nothing else.
    ordering.after_end(ctx, message, ctx.limits.ordering(message.queue), now)
    recorded = before.attempts - (1 if message.final_attempt is not None else 0)
    if recorded > 0 and change.expire_at is not None:
        # Its attempt history (history items; the last attempt rides on the write) goes with it.
        ctx.store.retain_attempts(message.queue, message.id, change.expire_at)
    if notice is not None:
        failure_notices.send_owed(ctx, message, notice, now)
    ctx.metrics.count(METRICS[message.status], queue=message.queue)
    error = None if message.status is Status.DELIVERED else message.last_error
    log(
        "finished",
        id=message.id,
        queue=message.queue,
        status=message.status.value,
        attempts=message.attempts,
        error=error,
    )
    chain(ctx, message, now, read)
    return message


# ended at admission -------------------------------------------------------------------------
def owed_at_admission(ctx: Context, message: Message, now: datetime) -> Owed | None:
    """A message stored already ended (due after its expiry): the notice it owes, whose outbox keys ride on
    its put (None for a pending one)."""
    return failure_notices.owed(ctx, message, now) if message.status.finished else None


def admitted(ctx: Context, message: Message, notice: Owed | None, now: datetime) -> None:
    """After the put of a message stored already ended: its notice sent, counted as any ending. No
    chaining here (an occurrence ending at admission would chain the next at once): the repair does it."""
    if not message.status.finished:
        return
    if notice is not None:
        failure_notices.send_owed(ctx, message, notice, now)
    ctx.metrics.count(METRICS[message.status], queue=message.queue)


# pending again ------------------------------------------------------------------------------
def retry(
    ctx: Context,
    message: Message,
    retry_at: datetime,
    error: str | None,
    rate: Rates | None,
    now: datetime,
    read: Chained | None = None,
) -> bool:
    """A failed attempt waits as pending for its retry; False when another version won the write. An
    occurrence's next one does not wait for its retries."""
    if not _pending_again(ctx, lifecycle.await_retry(message, retry_at, error), rate, now):
        return False
    chain(ctx, message, now, read)
    return True


def put_back(ctx: Context, message: Message, rate: Rates | None, now: datetime, *, due: datetime | None = None) -> bool:
    """An attempt begun but not started: pending again with its attempt given back (due at `due` if given: its
    delivery window's next opening)."""
    return _pending_again(ctx, lifecycle.put_back(message, due), rate, now)


def _pending_again(ctx: Context, change: Change, rate: Rates | None, now: datetime) -> bool:
    def write(_: Message, placement: Placement) -> Message:
        return ctx.store.await_retry(change.leased(placement.lease), placement.keys)

    try:
        ctx.handoff.hand_off(change.message, now, rate, write)
    except StaleVersionError:
        return False
    return True


def redeliver(
    ctx: Context, message: Message, change: Change, placement: Placement, *, operation: str | None = None
) -> Message:
    """A `lifecycle.redeliver` (single or bulk), handed off by the caller through `placement`: the attempt its
    outcome write carried becomes a history item first, and the history lives as long as the message again."""
    if message.final_attempt is not None:
        ctx.store.put_attempt(message.queue, message.final_attempt)
    leased = change.leased(placement.lease)
    ctx.store.await_retry(leased, placement.keys, last_op=operation)
    ctx.store.retain_attempts(message.queue, message.id, None)
    return leased.message


# schedule chaining --------------------------------------------------------------------------
def is_current(schedule: Schedule | None, message: Message) -> bool:
    """Whether `message` is an occurrence of this very version of its (still existing, running) schedule."""
    if schedule is None or schedule.paused or message.occurrence_at is None:
        return False
    return schedule.occurrence_id(message.occurrence_at) == message.id


def chain(ctx: Context, message: Message, now: datetime, read: Chained | None = None) -> Message | None:
    """After an occurrence's first outcome or its end (whatever it is): its schedule's next occurrence, stored
    once, unless its hand-off stored it. `read`: what the dispatcher read before the attempt, if any. Never
    raises: what fails here (as what a crash leaves undone) is done by the sweep's `repair`."""
    if message.schedule is None or message.occurrence_at is None or message.redelivered:
        return None
    if read is not None and read.stored:
        return None
    try:
        return _chain(ctx, message, now, read or _read(ctx, message))
    except (StoreError, TimerQueueError) as exc:
        _chain_failed(ctx, message, exc)
        return None


def chain_ahead(ctx: Context, message: Message, now: datetime) -> bool:
    """An occurrence the sweep claims for its first attempt: its next occurrence stored now, a lookahead before
    the attempt and off its path. True when it stored it, so its attempt need not chain (its timer says so:
    `Timer.chained`); False for any other message, or when this stored none or failed (its attempt chains, or
    the repair does)."""
    if message.schedule is None or message.occurrence_at is None or message.redelivered or message.attempts:
        return False
    try:
        # The schedule read eventually consistent: a stale one can only store an occurrence of a replaced version,
        # which its attempt cancels (`dispatch.attempt` reads it consistently), or store none (its attempt chains).
        read = _read(ctx, message, consistent=False)
        if read is None or delivery_control.of(read.queue).paused:
            # A paused queue holds its occurrence pending: it chains when it is delivered, as one stored
            # while the queue was paused would.
            return False
        # Nothing stored (none planned, or a stale read): its attempt chains, on what it reads itself.
        return _chain(ctx, message, now, read) is not None
    except (StoreError, TimerQueueError) as exc:
        _chain_failed(ctx, message, exc)
        return False


def _read(ctx: Context, message: Message, *, consistent: bool = True) -> Chained | None:
    """Its schedule (`consistent` or not) and queue, if it is an occurrence of the schedule's current version."""
    assert message.schedule is not None
    schedule = ctx.store.get_schedule(message.queue, message.schedule, consistent=consistent)
    # The queue always consistently: its pause state decides whether the chain goes on now.
    queue = ctx.store.get_queue(message.queue, consistent=True) if is_current(schedule, message) else None
    return Chained(schedule, queue) if schedule is not None and queue is not None else None


def _chain(ctx: Context, message: Message, now: datetime, read: Chained | None) -> Message | None:
    """The next occurrence, from what was read of the schedule and queue (None: one of them is gone)."""
    assert message.occurrence_at is not None
    if read is None or not is_current(read.schedule, message) or not epoch.belongs(read.queue, message.queue_epoch):
        return None
    return materialize(ctx, read.schedule, read.queue, message.occurrence_at, now)


def _chain_failed(ctx: Context, message: Message, exc: Exception) -> None:
    log("chain_failed", id=message.id, queue=message.queue, schedule=message.schedule, error=str(exc))
    ctx.metrics.count("ChainFailed", queue=message.queue)


def materialize(ctx: Context, schedule: Schedule, queue: Queue, after: datetime, now: datetime) -> Message | None:
    """Store the first occurrence after `after` (once), or the one its catch-up policy picks when that one is
    past (`catch_up.next_planned`), and hand it off like any message.

    None when the schedule has ended or is paused, or the occurrence was stored already.
    """
    at = catch_up.next_planned(schedule, after, now, admission.plan_window(schedule, queue))
    if at is None or schedule.paused:
        return None
    occurrence = admission.occurrence(schedule, queue, at, now)
    notice = owed_at_admission(ctx, occurrence, now)

    def write(message: Message, placement: Placement) -> Message | None:
        leased = replace(message, claimed_until=placement.lease)
        return leased if ctx.store.put_occurrence(leased, notice.keys if notice else placement.keys) else None

    # A rate-limited queue's occurrence takes its pacing slot as ingest does (one pacing write).
    stored = ctx.handoff.hand_off(occurrence, now, delivery_control.rates(delivery_control.of(queue)), write)
    if stored is None:
        return None
    ctx.metrics.count("Scheduled", queue=queue.name)
    admitted(ctx, stored, notice, now)
    return stored


def repair(ctx: Context, time_left: Callable[[], float] = lambda: 60.0, limit: int = REPAIR_BATCH) -> int:
    """The next occurrence of every running schedule that has none stored (its chaining failed or a writer
    died between two writes), for the next `limit` schedules of a round through all of them (a new round at
    most once a minute; a schedule looked at when its next occurrence is near or it was written lately:
    `core.repair_round`). Called by every scheduled sweeper run; returns how many it stored."""
    now = ctx.clock()
    progress = ctx.store.repair_position()
    if not progress.due(now):
        return 0
    schedules, after = ctx.store.schedule_round(progress.after, limit)
    queues: dict[str, Queue | None] = {}
    stored = 0
    for schedule in schedules:
        if time_left() < 5:
            break
        if schedule.queue not in queues:
            queues[schedule.queue] = ctx.store.get_queue(schedule.queue, consistent=True)
        if _repair_one(ctx, schedule, queues[schedule.queue], now, progress) is not None:
            log("chain_repaired", queue=schedule.queue, schedule=schedule.name)
            ctx.metrics.count("ChainRepaired", queue=schedule.queue)
            stored += 1
    ctx.store.save_repair_position(progress.moved_to(after, now))
    return stored


def _repair_one(
    ctx: Context, schedule: Schedule, queue: Queue | None, now: datetime, progress: RepairRound
) -> Message | None:
    # A schedule older than its queue belongs to a deleted queue of the same name; a paused queue holds
    # its occurrence pending, which chains when it is delivered.
    if schedule.paused or queue is None or schedule.created_at < queue.created_at:
        return None
    if delivery_control.of(queue).paused:
        return None
    following = schedule.next_after(now)
    # What its chain stores next: a closed window's stretch stores one occurrence for its opening.
    window = admission.plan_window(schedule, queue)
    at = None if following is None else catch_up.in_stretch(schedule, window, now, following)
    if at is None or not progress.looks_at(schedule, at, now):
        return None  # none to store, or not yet: a later round looks, before it is due
    if ctx.store.get_message(queue.name, schedule.occurrence_id(at), consistent=False) is not None:
        return None
    return materialize(ctx, schedule, queue, now, now)
