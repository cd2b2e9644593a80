"""Targets: whether one may be used (at create), and one attempt at an SQS queue, an AWS service target (Lambda,
SNS, EventBridge, Step Functions), an HTTP callback or a `later` callback, judged."""

from __future__ import annotations

import http.client
from collections.abc import Callable

from hourglass.core import aws_targets, deadline, delivery, delivery_control, sqs_targets
from hourglass.core.model import AwsTarget, HttpTarget, LaterTarget, Message, Queue, SqsTarget, Target
from hourglass.core.sqs_targets import SqsTargetRule
from hourglass.errors import DeliveryError, ValidationError
from hourglass.service.context import Context
from hourglass.settings import Settings


def check_allowed(ctx: Context, target: Target | None, field: str) -> None:
    """A 400 naming `field` for a target the stack does not allow (see `check_target`)."""
    check_target(ctx.settings, target, field, lambda url: ctx.check_url(url, allow_private=False))


def check_target(settings: Settings, target: Target | None, field: str, check_url: Callable[[str], None]) -> None:
    """A 400 naming `field` for an SQS queue or AWS service target `settings` do not allow (or one of the stack's
    own resources), or a callback to a private address when those are not allowed (`check_url` refuses those)."""
    if isinstance(target, SqsTarget):
        reserved = (settings.timer_queue_url, settings.timer_dlq_url)
        why = sqs_targets.refusal(target.queue_url, SqsTargetRule.parse(settings.sqs_targets), reserved=reserved)
        if why:
            raise ValidationError(f"{field}.queue_url", why)
        return
    if isinstance(target, AwsTarget):
        kind = aws_targets.kind_of(target)
        spec = settings.service_targets(kind.type)
        reason = aws_targets.refusal(target, spec, stack_name=settings.stack_name)
        if reason:
            raise ValidationError(f"{field}.{kind.field}", reason)
        return
    if settings.allow_private_callbacks or not isinstance(target, (HttpTarget, LaterTarget)):
        return
    try:
        check_url(target.url)
    except ValidationError as exc:
        raise ValidationError(field, exc.detail) from exc


def deliver(ctx: Context, message: Message, queue: Queue | None) -> delivery.Outcome:
    """One attempt at the message's target (or its queue's): the outcome, never an exception."""
    return judged(lambda: _attempt(ctx, message, queue))


def judged(send: Callable[[], delivery.Outcome]) -> delivery.Outcome:
    """The outcome of one send to a target or a failure destination: its exceptions judged as retryable or not."""
    try:
        return send()
    except DeliveryError as exc:
        return delivery.Outcome(False, retryable=exc.retryable, error=str(exc))
    except ValidationError as exc:
        # The callback now resolves to a forbidden address: retrying may help if DNS changes back.
        return delivery.Outcome(False, retryable=True, error=exc.message)
    except (OSError, http.client.HTTPException) as exc:
        return delivery.transport_failure(f"{type(exc).__name__}: {exc}")


def _attempt(ctx: Context, message: Message, queue: Queue | None) -> delivery.Outcome:
    target = message.target or (queue.settings.target if queue else None)
    attempt = message.attempts
    if isinstance(target, SqsTarget):
        ctx.targets.send(
            target.queue_url, delivery.sqs_envelope(message, attempt), group=message.queue, dedup_id=message.id
        )
        return delivery.DELIVERED
    if isinstance(target, AwsTarget):
        envelope = delivery.sqs_envelope(message, attempt)
        execution = aws_targets.execution_name(message.id, str(attempt))
        ctx.services.send(target, envelope, group=message.queue, dedup_id=message.id, execution=execution)
        return delivery.DELIVERED
    if isinstance(target, LaterTarget):
        reply = ctx.post(
            target.url,
            delivery.later_request(message),
            {"Content-Type": "application/json"},
            allow_private=ctx.settings.allow_private_callbacks,
        )
        return delivery.judge_later(reply.status, reply.body)
    if isinstance(target, HttpTarget):
        signed = queue.settings.signing_secrets if queue else ()
        body, headers = delivery.http_request(message, attempt, headers=target.headers, secrets=signed, now=ctx.clock())
        allow = ctx.settings.allow_private_callbacks
        connect, read = deadline.http_timeouts(delivery_control.of(queue).timeout)
        reply = ctx.post(target.url, body, headers, allow_private=allow, connect_timeout=connect, read_timeout=read)
        return delivery.judge_http(reply.status, reply.headers.get("retry-after"), ctx.clock(), reply.body)
    return delivery.Outcome(False, retryable=False, error="message has no target")
