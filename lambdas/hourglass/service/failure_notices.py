"""Failure notifications: one notice (at least) to the queue's failure destination when a message ends failed or
expired, kept in an outbox on the final item until it is sent (a writer dying in between loses none), each entry
tried again with backoff, fairly across queues, and given up visibly after a bounded number of tries."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from hourglass.core import aws_targets, delivery, delivery_control, epoch, failure_notice
from hourglass.core.model import AwsTarget, FailureDestination, Message, NoticeStatus, Queue, SqsTarget
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.errors import StoreError
from hourglass.logs import log
from hourglass.service import targets
from hourglass.service.context import Context

Destination = FailureDestination

NOTICE_TIMEOUT = (5.0, 5.0)
# Sends one recovery run tries at most: a dead destination costs each sweep at most QUEUE_FAILURES of them.
RECOVERY_BATCH = 100
# Due outbox entries one recovery run reads (keys only), then takes in turn from each queue.
RECOVERY_READ = 1000
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
    return _try(ctx, notice.destination, message, finished_at, tries=1)


def recover(ctx: Context, time_left: Callable[[], float] = lambda: 60.0, limit: int = RECOVERY_BATCH) -> int:
    """Tries the notices whose writer died before sending them or whose next try has come: up to RECOVERY_READ
    due outbox entries, in turn per queue, at most `limit` sends and QUEUE_FAILURES failures per queue, while
    `time_left()` leaves room for one more send. Called by every scheduled sweeper run; returns how many it sent."""
    now = ctx.clock()
    low, high = failure_notice.outbox_range(now)
    due = islice(ctx.store.query_due(failure_notice.OUTBOX_PK, low, high, limit=RECOVERY_READ), RECOVERY_READ)
    failures: Counter[str] = Counter()
    sent = tried = 0
    for entry in failure_notice.fair_order(due):
        if tried >= limit or time_left() < sum(NOTICE_TIMEOUT) + TIME_MARGIN:
            break
        if failures[entry.queue] >= QUEUE_FAILURES:
            continue  # its destination looks down: the other queues' notices go first in this run
        message = ctx.store.get_message(entry.queue, entry.id)
        notice = message.notice if message is not None and message.version == entry.version else None
        if message is None or notice is None or notice.next_try_at is None or notice.next_try_at > now:
            continue  # the index lags a write that already replaced, moved or removed the item's entry
        queue = ctx.store.get_queue(message.queue, consistent=True)
        # A message of a deleted queue notifies no later queue of the same name.
        same_life = epoch.belongs(queue, message.queue_epoch)
        destination = delivery_control.of(queue if same_life else None).failure_destination
        if destination is None:
            _clear(ctx, message)  # the destination was removed since: nothing to send any more
            continue
        tried += 1
        finished_at = notice.finished_at or notice.next_try_at - failure_notice.OUTBOX_GRACE
        if _try(ctx, destination, message, finished_at, tries=notice.tries + 1):
            ctx.metrics.count("FailureNoticeRecovered", queue=message.queue)
            sent += 1
        else:
            failures[entry.queue] += 1
    return sent


def _try(ctx: Context, destination: Destination, message: Message, finished_at: datetime, *, tries: int) -> bool:
    """The notice's `tries`-th try: cleared once sent; otherwise its entry moves to its next try, or the
    notice is given up (permanent refusal, or the last try), counted as `FailureNoticeAbandoned`."""
    outcome = targets.judged(lambda: _send(ctx, destination, message, finished_at))
    if outcome.delivered:
        ctx.metrics.count("FailureNoticeSent", queue=message.queue)
        _clear(ctx, message)
        return True
    log("failure_notice_failed", id=message.id, queue=message.queue, tries=tries, error=outcome.error)
    ctx.metrics.count("FailureNoticeFailed", queue=message.queue)
    notice = failure_notice.after_failure(message.id, tries, outcome, finished_at, ctx.clock())
    try:
        recorded = ctx.store.record_notice(message, notice)
    except StoreError as exc:  # the entry stays as it was: tried again, one try more than counted
        log("failure_notice_record_failed", id=message.id, queue=message.queue, error=str(exc))
        return False
    if recorded and notice.status is NoticeStatus.ABANDONED:
        ctx.metrics.count("FailureNoticeAbandoned", queue=message.queue)
        log("failure_notice_abandoned", id=message.id, queue=message.queue, tries=tries, error=outcome.error)
    return False


def _clear(ctx: Context, message: Message) -> None:
    try:
        ctx.store.clear_notice(message.queue, message.id, message.version)
    except StoreError as exc:  # sent but still listed: recovery sends it once more (at least once)
        log("failure_notice_clear_failed", id=message.id, queue=message.queue, error=str(exc))


def queue_paused(ctx: Context, queue: Queue, reason: str, ratio: float, paused_at: datetime) -> bool:
    """The `queue.paused` notice to the queue's failure destination, if any; True when sent. Tried once: a
    failed send is logged and counted (`FailureNoticeFailed`), and the queue document still says why."""
    destination = delivery_control.of(queue).failure_destination
    if destination is None:
        return False
    body = json.dumps(failure_notice.queue_paused_notice(queue.name, reason, ratio, paused_at))
    headers = {"Content-Type": "application/json", "Hourglass-Event": "queue.paused"}
    dedup = f"paused#{to_ms(paused_at)}"
    execution = aws_targets.execution_name(queue.name, f"paused{to_ms(paused_at)}")
    outcome = targets.judged(lambda: _transport(ctx, destination, body, headers, queue.name, dedup, execution))
    ctx.metrics.count("FailureNoticeSent" if outcome.delivered else "FailureNoticeFailed", queue=queue.name)
    if not outcome.delivered:
        log("queue_paused_notice_failed", queue=queue.name, error=outcome.error)
    return outcome.delivered


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
