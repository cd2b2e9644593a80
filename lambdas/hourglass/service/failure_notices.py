"""Failure notifications: one notice to the queue's failure destination when a message ends failed or expired."""

from __future__ import annotations

import http.client
import json

from hourglass.core import delivery_control, failure_notice
from hourglass.core.model import HttpTarget, Message, SqsTarget
from hourglass.errors import DeliveryError, StoreError, ValidationError
from hourglass.logs import log
from hourglass.service.context import Context

NOTICE_TIMEOUT = (5.0, 5.0)


def notify_ended(ctx: Context, message: Message) -> bool:
    """Send the notice for `message`, just written failed or expired; True when one was sent.

    Callers: the dispatcher after its terminal write, and any other path that ends a message
    (the timer-DLQ consumer). Messages of other statuses or of queues without a destination are
    a no-op; a failed send is logged and counted (`FailureNoticeFailed`), never raised.
    """
    if not failure_notice.notifies(message.status):
        return False
    try:
        queue = ctx.store.get_queue(message.queue, consistent=True)
    except StoreError as exc:
        log("failure_notice_failed", id=message.id, queue=message.queue, error=str(exc))
        ctx.metrics.count("FailureNoticeFailed", queue=message.queue)
        return False
    destination = delivery_control.of(queue).failure_destination
    if destination is None:
        return False
    finished_at = ctx.clock()
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
