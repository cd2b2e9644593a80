"""Failure notifications: one notice (at least) to the queue's failure destination when a message ends failed or
expired, kept in an outbox on the final item until it is sent, so that a writer dying in between loses none."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from hourglass.core import delivery_control, epoch, failure_notice
from hourglass.core.model import HttpTarget, Message, SqsTarget
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import from_ms
from hourglass.errors import DeliveryError, StoreError, ValidationError
from hourglass.logs import log
from hourglass.service.context import Context

NOTICE_TIMEOUT = (5.0, 5.0)
# Outbox entries one recovery run sends at most: a dead destination costs each sweep this many attempts.
RECOVERY_BATCH = 100
# Recovery stops when a send that hangs to its timeout could outlast the invocation by less than this (s).
TIME_MARGIN = 5.0


@dataclass(frozen=True)
class Owed:
    """A notice the final write of a message owes: where it goes, and the outbox keys that write carries."""

    destination: HttpTarget | SqsTarget
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

    A failed send (logged, counted as `FailureNoticeFailed`, never raised) leaves the entry for `recover`.
    """
    if not _deliver(ctx, notice.destination, message, finished_at):
        return False
    _clear(ctx, message)
    return True


def recover(ctx: Context, time_left: Callable[[], float] = lambda: 60.0, limit: int = RECOVERY_BATCH) -> int:
    """Sends the notices whose writer died before sending them or whose send failed: the outbox entries older
    than OUTBOX_GRACE, oldest first, while `time_left()` leaves room for one more send. Called by every
    scheduled sweeper run; returns how many it sent."""
    now = ctx.clock()
    low, high = failure_notice.outbox_range(now)
    entries = ctx.store.query_due(failure_notice.OUTBOX_PK, low, high, limit=limit)
    sent = 0
    for entry in islice(entries, limit):
        if time_left() < sum(NOTICE_TIMEOUT) + TIME_MARGIN:
            break
        message = ctx.store.get_message(entry.queue, entry.id)
        if message is None or message.version != entry.version or not failure_notice.notifies(message.status):
            continue  # the index lags a write that already replaced (or removed) the item, and its entry
        queue = ctx.store.get_queue(message.queue, consistent=True)
        # A message of a deleted queue notifies no later queue of the same name.
        same_life = epoch.belongs(queue, message.queue_epoch)
        destination = delivery_control.of(queue if same_life else None).failure_destination
        finished_at = from_ms(entry.due_ms) - failure_notice.OUTBOX_GRACE
        if destination is None:
            _clear(ctx, message)  # the destination was removed since: nothing to send any more
        elif _deliver(ctx, destination, message, finished_at):
            _clear(ctx, message)
            ctx.metrics.count("FailureNoticeRecovered", queue=message.queue)
            sent += 1
    return sent


def _clear(ctx: Context, message: Message) -> None:
    try:
        ctx.store.clear_notice(message.queue, message.id, message.version)
    except StoreError as exc:  # sent but still listed: recovery sends it once more (at least once)
        log("failure_notice_clear_failed", id=message.id, queue=message.queue, error=str(exc))


def _deliver(ctx: Context, destination: HttpTarget | SqsTarget, message: Message, finished_at: datetime) -> bool:
    notice = failure_notice.failure_notice(message, finished_at)
    try:
        _send(ctx, destination, message, notice)
    except (DeliveryError, ValidationError, OSError, http.client.HTTPException) as exc:
        log("failure_notice_failed", id=message.id, queue=message.queue, error=str(exc))
        ctx.metrics.count("FailureNoticeFailed", queue=message.queue)
        return False
    ctx.metrics.count("FailureNoticeSent", queue=message.queue)
    return True


def _send(ctx: Context, destination: HttpTarget | SqsTarget, message: Message, notice: dict[str, object]) -> None:
    body = json.dumps(notice, separators=(",", ":"), ensure_ascii=False)
    if isinstance(destination, SqsTarget):
        dedup = f"{message.id}#{message.version}"
        ctx.targets.send(destination.queue_url, body, group=message.queue, dedup_id=dedup)
        return
    headers = {**destination.headers, **failure_notice.notice_headers(message)}
    connect, read = NOTICE_TIMEOUT
    reply = ctx.post(
        destination.url,
        body.encode(),
        headers,
        allow_private=ctx.settings.allow_private_callbacks,
        connect_timeout=connect,
        read_timeout=read,
    )
    if not 200 <= reply.status < 300:
        raise DeliveryError(f"failure destination answered HTTP {reply.status}", retryable=True)
