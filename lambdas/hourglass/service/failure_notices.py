"""Failure notifications: one notice (at least) to the queue's failure destination when a message ends failed or
expired or the queue pauses itself, kept in an outbox (on the final item, or an item of the pause) until sent, each
entry tried again with backoff, fairly across queues, and given up visibly after a bounded number of tries."""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import islice
from typing import Protocol

from hourglass.adapters import storage
from hourglass.core import aws_targets, delivery, delivery_control, epoch, failure_notice, keys
from hourglass.core.failure_notice import Notice, QueuePaused
from hourglass.core.handoff import DueEntry
from hourglass.core.model import AwsTarget, FailureDestination, Message, NoticeStatus, SqsTarget
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import targets
from hourglass.service.context import Context


class StorageUsed(storage.Queues, storage.Messages, storage.Notices, storage.DueIndex, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


Destination = FailureDestination

NOTICE_TIMEOUT = (5.0, 5.0)
# Sends one recovery run tries at most: a dead destination costs each sweep at most QUEUE_FAILURES of them.
RECOVERY_BATCH = 100
# Due outbox entries one recovery run reads (keys only), then takes in turn from each queue.
RECOVERY_READ = 1000
RECOVERY_PAGE = 100  # per outbox partition (keys.outbox_pks): most are empty
# Failed tries of one queue's notices after which a run leaves that queue's other entries to the next run.
QUEUE_FAILURES = 3
# Recovery stops when a send that hangs to its timeout could outlast the invocation by less than this (s).
TIME_MARGIN = 5.0


@dataclass(frozen=True)
class Owed:
    """A notice the final write of a message owes: where it goes, and the outbox keys that write carries."""

    destination: Destination
    keys: SweepKeys


def owed(ctx: Context, message: Message, finished_at: datetime) -> Owed | None:
    """What ending `message` (its final version) owes: None unless it ends failed or expired on a queue with a
    failure destination, so other messages and queues pay nothing. Reads the queue before anything is written
    (a StoreError then leaves the message as it was)."""
    if not failure_notice.notifies(message.status):
        return None
    destination = delivery_control.of(ctx.store.get_queue(message.queue, consistent=True)).failure_destination
    if destination is None:
        return None
    return Owed(destination, failure_notice.outbox_keys(message.id, finished_at))


def send_owed(ctx: Context, message: Message, notice: Owed, finished_at: datetime) -> bool:
    """Sends the notice of `message`, just written with `notice.keys`, and clears its outbox entry; True when sent.

    A failed send is the notice's first try (`_try`): logged, counted, never raised; its entry waits for `recover`.
    """
    return _try(ctx, notice.destination, _MessageNotice(message, finished_at, tries=1))


def recover(ctx: Context, time_left: Callable[[], float] = lambda: 60.0, limit: int = RECOVERY_BATCH) -> int:
    """Tries the notices whose writer died before sending them or whose next try has come: up to RECOVERY_READ
    due outbox entries, in turn per queue, at most `limit` sends and QUEUE_FAILURES failures per queue, while
    `time_left()` leaves room for one more send. Called by every scheduled sweeper run; returns how many it sent."""
    now = ctx.clock()
    low, high = failure_notice.outbox_range(now)
    due = islice(_due_entries(ctx, low, high), RECOVERY_READ)
    failures: Counter[str] = Counter()
    sent = tried = 0
    for entry in failure_notice.fair_order(due):
        if tried >= limit or time_left() < sum(NOTICE_TIMEOUT) + TIME_MARGIN:
            break
        if failures[entry.queue] >= QUEUE_FAILURES:
            continue  # its destination looks down: the other queues' notices go first in this run
        recover_one = _recover_queue_paused if failure_notice.is_queue_paused(entry.id) else _recover_message
        outcome = recover_one(ctx, entry, now)
        if outcome is None:
            continue
        tried += 1
        if outcome:
            ctx.metrics.count("FailureNoticeRecovered", queue=entry.queue)
            sent += 1
        else:
            failures[entry.queue] += 1
    return sent


def _due_entries(ctx: Context, low: str, high: str) -> Iterator[DueEntry]:
    """The due entries of every outbox partition, earliest first; each partition's Query pages on only as far
    as the run reads."""
    partitions = (ctx.store.query_due(pk, low, high, limit=RECOVERY_PAGE) for pk in keys.outbox_pks())
    return heapq.merge(*partitions, key=lambda entry: (entry.due_ms, entry.id))


def _recover_message(ctx: Context, entry: DueEntry, now: datetime) -> bool | None:
    """Recovery's try of a message's notice: None when there was nothing to try."""
    message = ctx.store.get_message(entry.queue, entry.id)
    notice = message.notice if message is not None and message.version == entry.version else None
    if message is None or notice is None or notice.next_try_at is None or notice.next_try_at > now:
        return None  # the index lags a write that already replaced, moved or removed the item's entry
    destination = _destination_of_life(ctx, message.queue, message.queue_epoch)
    if destination is None:
        _clear(ctx, message)  # the destination was removed since: nothing to send any more
        return None
    finished_at = notice.finished_at or notice.next_try_at - failure_notice.OUTBOX_GRACE
    return _try(ctx, destination, _MessageNotice(message, finished_at, tries=notice.tries + 1))


def _destination_of_life(ctx: Context, queue_name: str, life: datetime | None) -> Destination | None:
    """The failure destination of the queue life a notice belongs to: a notice of a deleted queue notifies no
    later queue of the same name (None, as for a queue without a destination)."""
    queue = ctx.store.get_queue(queue_name, consistent=True)
    return delivery_control.of(queue if epoch.belongs(queue, life) else None).failure_destination


class _Subject(Protocol):
    """What a notice is about, as its try needs it: a message that ended, or a queue that paused itself."""

    @property
    def queue(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def tries(self) -> int: ...  # this try's number
    @property
    def since(self) -> datetime: ...  # what the notice's deadline counts from
    @property
    def failed_event(self) -> str: ...

    def send(self, ctx: Context, destination: Destination) -> delivery.Outcome: ...
    def clear(self, ctx: Context) -> None: ...  # sent or given up: out of the outbox
    def record(self, ctx: Context, notice: Notice) -> bool:
        """Stores a failed try's `notice` (its next try, or its giving up): False when a giving up is not to be
        counted (nothing was written)."""
        ...


def _try(ctx: Context, destination: Destination, subject: _Subject) -> bool:
    """The notice's try: cleared once sent; otherwise it moves to its next try, or is given up (permanent
    refusal, or the last try), counted as `FailureNoticeAbandoned`."""
    outcome = targets.judged(lambda: subject.send(ctx, destination))
    if outcome.delivered:
        ctx.metrics.count("FailureNoticeSent", queue=subject.queue)
        subject.clear(ctx)
        return True
    log(subject.failed_event, id=subject.id, queue=subject.queue, tries=subject.tries, error=outcome.error)
    ctx.metrics.count("FailureNoticeFailed", queue=subject.queue)
    notice = failure_notice.after_failure(subject.id, subject.tries, outcome, subject.since, ctx.clock())
    if subject.record(ctx, notice) and notice.status is NoticeStatus.ABANDONED:
        ctx.metrics.count("FailureNoticeAbandoned", queue=subject.queue)
        log("failure_notice_abandoned", id=subject.id, queue=subject.queue, tries=subject.tries, error=outcome.error)
    return False


@dataclass(frozen=True)
class _MessageNotice:
    """The notice of `message` (its final version), which ended at `since`, at its `tries`-th try."""

    message: Message
    since: datetime
    tries: int
    failed_event = "failure_notice_failed"

    @property
    def queue(self) -> str:
        return self.message.queue

    @property
    def id(self) -> str:
        return self.message.id

    def send(self, ctx: Context, destination: Destination) -> delivery.Outcome:
        return _send(ctx, destination, self.message, self.since)

    def clear(self, ctx: Context) -> None:
        _clear(ctx, self.message)

    def record(self, ctx: Context, notice: Notice) -> bool:
        try:
            return ctx.store.record_notice(self.message, notice)  # False when the item moved on: not counted
        except StoreError as exc:  # the entry stays as it was: tried again, one try more than counted
            log("failure_notice_record_failed", id=self.id, queue=self.queue, error=str(exc))
            return False


def _clear(ctx: Context, message: Message) -> None:
    try:
        ctx.store.clear_notice(message.queue, message.id, message.version)
    except StoreError as exc:  # sent but still listed: recovery sends it once more (at least once)
        log("failure_notice_clear_failed", id=message.id, queue=message.queue, error=str(exc))


def send_queue_paused(ctx: Context, destination: Destination, paused: QueuePaused) -> bool:
    """The first try of a `queue.paused` notice, just stored with the pause; True when sent. As `send_owed`:
    a failed send waits in the outbox for `recover`."""
    return _try(ctx, destination, _PauseNotice(paused))


def _recover_queue_paused(ctx: Context, entry: DueEntry, now: datetime) -> bool | None:
    """Recovery's try of a `queue.paused` notice: None when there was nothing to try (sent, moved on, or
    owed by a queue that is gone or no longer has a failure destination: then dropped)."""
    paused = ctx.store.get_queue_paused(entry.queue, entry.id)
    if paused is None or paused.version != entry.version or (paused.notice.next_try_at or now) > now:
        return None  # the index lags a write that already moved or removed the entry
    destination = _destination_of_life(ctx, paused.queue, paused.epoch)
    if destination is None:
        ctx.store.clear_queue_paused(paused)
        return None
    return _try(ctx, destination, _PauseNotice(paused))


@dataclass(frozen=True)
class _PauseNotice:
    """A `queue.paused` notice at its next try: deleted once sent or given up, else moved to its next try."""

    paused: QueuePaused
    failed_event = "queue_paused_notice_failed"

    @property
    def queue(self) -> str:
        return self.paused.queue

    @property
    def id(self) -> str:
        return self.paused.id

    @property
    def tries(self) -> int:
        return self.paused.notice.tries + 1

    @property
    def since(self) -> datetime:
        return self.paused.paused_at

    def send(self, ctx: Context, destination: Destination) -> delivery.Outcome:
        return _send_queue_paused(ctx, destination, self.paused)

    def clear(self, ctx: Context) -> None:
        _settle(ctx, self.paused, lambda: ctx.store.clear_queue_paused(self.paused))

    def record(self, ctx: Context, notice: Notice) -> bool:
        if notice.status is NoticeStatus.ABANDONED:
            self.clear(ctx)
        else:
            moved = replace(self.paused, notice=notice, version=self.paused.version + 1)
            _settle(ctx, self.paused, lambda: ctx.store.record_queue_paused(moved))
        return True  # given up whether or not its item could be deleted


def _settle(ctx: Context, paused: QueuePaused, write: Callable[[], object]) -> None:
    try:
        write()
    except StoreError as exc:  # the entry stays as it was: tried again (at least once)
        log("failure_notice_record_failed", id=paused.id, queue=paused.queue, error=str(exc))


def _send_queue_paused(ctx: Context, destination: Destination, paused: QueuePaused) -> delivery.Outcome:
    body = json.dumps(failure_notice.queue_paused_notice(paused))
    headers = {"Content-Type": "application/json", "Hourglass-Event": "queue.paused"}
    stamp = to_ms(paused.paused_at)
    execution = aws_targets.execution_name(paused.queue, f"paused{stamp}")
    return _transport(ctx, destination, body, headers, paused.queue, f"paused#{stamp}", execution)


def _send(ctx: Context, destination: Destination, message: Message, finished_at: datetime) -> delivery.Outcome:
    body = failure_notice.notice_text(message, finished_at, destination)
    headers = failure_notice.notice_headers(message)
    execution = aws_targets.execution_name(message.id, f"notice{message.version}")
    return _transport(ctx, destination, body, headers, message.queue, f"{message.id}#{message.version}", execution)


def _transport(
    ctx: Context, destination: Destination, body: str, extra: dict[str, str], group: str, dedup: str, execution: str
) -> delivery.Outcome:
    """One notice to its destination; `dedup` for FIFO queues, `execution` names a Step Functions start."""
    if isinstance(destination, SqsTarget):
        ctx.targets.send(destination.queue_url, body, group=group, dedup_id=dedup)
        return delivery.DELIVERED
    if isinstance(destination, AwsTarget):
        ctx.services.send(destination, body, group=group, dedup_id=dedup, execution=execution)
        return delivery.DELIVERED
    headers = {**destination.headers, **extra}
    connect, read = NOTICE_TIMEOUT
    reply = ctx.post(
        destination.url,
        body.encode(),
        headers,
        allow_private=ctx.settings.allow_private_callbacks,
        connect_timeout=connect,
        read_timeout=read,
    )
    return delivery.judge_http(reply.status, reply.headers.get("retry-after"), ctx.clock())
