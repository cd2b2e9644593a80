"""Queue and message use cases behind the REST API: create, read, list, cancel, reschedule."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.adapters.message_storage import cursor_after
from hourglass.core import delivery_control, lifecycle, limits, schedule, sqs_targets, validation
from hourglass.core.admission import admit
from hourglass.core.document import message_doc
from hourglass.core.handoff import Claim, Placement, Scheduled
from hourglass.core.ids import is_valid_id, new_id
from hourglass.core.lifecycle import can_cancel, can_edit
from hourglass.core.model import (
    LATER_BACKOFF_BASE,
    LATER_BACKOFF_MAX,
    LATER_NAMESPACE,
    HttpTarget,
    LaterTarget,
    Message,
    NewMessage,
    Queue,
    QueueSettings,
    RetryPolicy,
    SqsTarget,
    Status,
    Target,
)
from hourglass.core.sqs_targets import SqsTargetRule
from hourglass.errors import (
    ConflictError,
    NotFoundError,
    StaleVersionError,
    ValidationError,
)
from hourglass.logs import log
from hourglass.service.context import Context

DEDUP_WINDOW = timedelta(hours=24)
LATER_SETTINGS = QueueSettings(max_delay=validation.MAX_HORIZON)
EDIT_ATTEMPTS = 3
# DELETE queue cancels pending messages for at most this long (API Gateway answers within 29 s).
DELETE_QUEUE_BUDGET = timedelta(seconds=15)


class Messages:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store = ctx.store

    # queues -------------------------------------------------------------------------------
    def put_queue(self, name: str, doc: Any) -> tuple[Queue, bool]:
        validation.queue_name(name)
        settings = validation.queue_settings(doc)
        self._check_target(settings.target, "target")
        existing = self.store.get_queue(name, consistent=True)
        # PUT leaves the paused state as it is (only /pause and /resume change it).
        control = delivery_control.delivery_control(doc or {}, paused=delivery_control.of(existing).paused)
        self._check_target(control.failure_destination, "failure_destination")
        created_at = existing.created_at if existing else self.ctx.clock()
        queue = Queue(name=name, settings=settings, created_at=created_at, control=control)
        self.store.register_queue(name)  # idempotent; before the queue item, so a listed name may lack one
        return queue, self.store.put_queue(queue)

    def list_queues(self, params: dict[str, str] | None) -> tuple[list[Queue], str | None]:
        unknown = sorted(set(params or {}) - {"limit", "cursor"})
        if unknown:
            raise ValidationError(unknown[0], "is not a known parameter")
        query = validation.list_query(params)
        return self.store.list_queues(limit=query.limit, cursor=query.cursor)

    def get_queue(self, name: str) -> Queue:
        validation.queue_name(name)
        queue = self.store.get_queue(name, consistent=True)
        if queue is None:
            raise NotFoundError(f"queue {name} does not exist")
        return queue

    def delete_queue(self, name: str) -> None:
        """Deletes the queue, then cancels its pending messages for as long as the request budget allows.

        The queue item's absence is the tombstone: the dispatcher reads it strongly consistently
        (once per batch and queue) and cancels, never delivers, a message of a deleted queue or of
        an earlier queue of the same name (its epoch differs), so nothing the cancel pass leaves
        is delivered after the 204.
        """
        self.get_queue(name)
        self.store.delete_queue(name)
        self.store.unregister_queue(name)
        started = self.ctx.clock()
        cursor = None
        while self.ctx.clock() - started < DELETE_QUEUE_BUDGET:
            pending, cursor = self.store.list_messages(name, status=Status.PENDING, limit=100, cursor=cursor)
            for message in pending:
                self._try_cancel(message)
            if cursor is None:
                return
        log("delete_queue_incomplete", queue=name)

    def _try_cancel(self, message: Message) -> None:
        with contextlib.suppress(StaleVersionError):
            self._cancel_version(message)

    # messages -----------------------------------------------------------------------------
    def create(self, queue_name: str, doc: Any) -> list[tuple[Message, bool]]:
        queue = self.get_queue(queue_name)
        now = self.ctx.clock()
        requests = validation.message_batch(doc, queue.settings, now)
        for index, request in enumerate(requests):
            self._check_target(request.target, f"messages[{index}].target")
        messages = [self._new_message(queue, request, now) for request in requests]
        return self._store_new(messages, now, rate=delivery_control.of(queue).rate_limit)

    def _new_message(self, queue: Queue, request: NewMessage, now: datetime) -> Message:
        return admit(queue, request, now, new_id())

    def _store_new(
        self, messages: list[Message], now: datetime, rate: float | None = None
    ) -> list[tuple[Message, bool]]:
        """Dedup messages are written first (with a lease), then every timer goes out at once; the
        other items are written last, with index keys only if their timers were refused.

        A rate-limited queue's timers get pacing slots: one write for the request's plain messages
        (in due order), one per dedup message."""
        handoff = self.ctx.handoff
        results: dict[int, tuple[Message, bool]] = {}
        plain: list[tuple[int, Message, Placement]] = []
        timers: list[Scheduled] = []
        claims: list[Claim] = []
        seen_dedup: dict[str, Message] = {}
        for index, message in enumerate(messages):
            if message.dedup_id is None:
                placement = handoff.place(message, now, written_first=False)
                plain.append((index, message, placement))
            elif message.dedup_id in seen_dedup:
                results[index] = (seen_dedup[message.dedup_id], True)
            else:
                stored, duplicate = self._store_dedup(message, now, timers, claims, rate)
                seen_dedup[message.dedup_id] = stored
                results[index] = (stored, duplicate)
        paced = handoff.pace([placement for _, _, placement in plain], rate, now)
        plain = [(index, message, placement) for (index, message, _), placement in zip(plain, paced, strict=True)]
        timers.extend(placement.timer for placement in paced if placement.timer is not None)
        sent = handoff.send_first(timers)
        if not sent:
            handoff.give_back(claims)
        self.store.put_messages([(message, placement.index_keys(sent=sent)) for _, message, placement in plain])
        for index, message, _ in plain:
            results[index] = (message, False)
            self.ctx.metrics.count("Scheduled", queue=message.queue)
        return [results[i] for i in range(len(messages))]

    def _store_dedup(
        self, message: Message, now: datetime, timers: list[Scheduled], claims: list[Claim], rate: float | None
    ) -> tuple[Message, bool]:
        # Stored with due-index keys and a lease: if the timer is never sent, the recovery sweep
        # hands it off when the lease runs out.
        placement = self.ctx.handoff.place(message, now, written_first=True, rate=rate)
        if placement.lease is not None:
            message = replace(message, claimed_until=placement.lease)
        first_id = self.store.put_with_dedup(message, placement.keys, now=now, window=DEDUP_WINDOW)
        if first_id is not None:
            original = self.store.get_message(message.queue, first_id)
            return (original or message, True)
        claim = placement.claim()
        if placement.timer is not None and claim is not None:
            timers.append(placement.timer)
            claims.append(claim)
        self.ctx.metrics.count("Scheduled", queue=message.queue)
        return message, False

    def get(self, queue: str, message_id: str) -> Message:
        if queue != LATER_NAMESPACE:
            validation.queue_name(queue)
        message = self.store.get_message(queue, message_id) if is_valid_id(message_id) else None
        if message is None:
            raise NotFoundError(f"message {message_id} does not exist in queue {queue}")
        return message

    def list(self, queue_name: str, params: dict[str, str] | None) -> tuple[list[Message], str | None]:
        query = validation.list_query(params)
        self.get_queue(queue_name)
        found, cursor = self.store.list_messages(
            queue_name, status=query.status, limit=query.limit, cursor=query.cursor, schedule=query.schedule
        )
        # Contract v1.1: a page may hold fewer than `limit`, so that it fits Lambda's 6 MB response.
        fit = limits.page_length([message_doc(m) for m in found])
        if fit < len(found):
            return found[:fit], cursor_after(found[fit - 1])
        return found, cursor

    def cancel(self, queue: str, message_id: str) -> Message:
        message = self.get(queue, message_id)
        for _ in range(EDIT_ATTEMPTS):
            if message.status is Status.CANCELLED:
                return message
            if not can_cancel(message.status):
                raise ConflictError(f"message {message_id} is {message.status.value}")
            try:
                return self._cancel_version(message)
            except StaleVersionError:
                message = self.get(queue, message_id)
        raise ConflictError(f"message {message_id} keeps changing; try again")

    def _cancel_version(self, message: Message) -> Message:
        retention = timedelta(days=self.ctx.settings.retention_days)
        change = lifecycle.cancel(message, self.ctx.clock(), retention)
        self.store.cancel(change)
        if message.attempts and change.expire_at is not None:
            # Its attempt history (retries before the cancel) goes with it.
            self.store.retain_attempts(message.queue, message.id, change.expire_at)
        self.ctx.metrics.count("Cancelled", queue=message.queue)
        return change.message

    def patch(self, queue_name: str, message_id: str, doc: Any) -> Message:
        queue = self.get_queue(queue_name)
        for _ in range(EDIT_ATTEMPTS):
            message = self.get(queue_name, message_id)
            if not can_edit(message.status):
                raise ConflictError(f"message {message_id} is {message.status.value}, not pending")
            now = self.ctx.clock()
            edit = validation.message_patch(doc, queue.settings, now)
            if edit.has_body:
                limits.check_message(
                    edit.body, message.target, queue_target=queue.settings.target, dedup_id=message.dedup_id
                )
            try:
                return self._apply_patch(message, edit, now, delivery_control.of(queue).rate_limit)
            except StaleVersionError:
                continue
        raise ConflictError(f"message {message_id} keeps changing; try again")

    def _apply_patch(
        self, message: Message, edit: validation.MessagePatch, now: datetime, rate: float | None = None
    ) -> Message:
        due = message.due_at
        if edit.delay is not None or edit.deliver_at is not None:
            due = schedule.due_time(now, delay=edit.delay, deliver_at=edit.deliver_at, default_delay=0)
        change = lifecycle.reschedule(message, due=due, body=edit.body if edit.has_body else message.body)
        handoff = self.ctx.handoff
        placement = handoff.place(change.message, now, written_first=True, rate=rate)
        change = change.leased(placement.lease)
        self.store.reschedule(change, placement.keys, new_body=edit.has_body)
        claim = placement.claim()
        if claim is not None:
            # If this send fails the recovery sweep hands the message off when its lease ends.
            handoff.send_claimed([claim], now, give_back=False)
        return change.message

    # later-compatible ---------------------------------------------------------------------
    def later_create(self, doc: Any) -> Message:
        task = validation.later_task(doc)
        if validation.body_size(task.content) > validation.MAX_BODY_BYTES:
            raise ValidationError("content", f"is larger than {validation.MAX_BODY_BYTES} bytes", code="too_large")
        self._check_target(LaterTarget(task.callback), "callback")
        now = self.ctx.clock()
        queue = Queue(LATER_NAMESPACE, LATER_SETTINGS, created_at=now)
        message = replace(
            self._new_message(queue, NewMessage(body=task.content, delay=task.delay), now),
            topic=task.topic,
            target=LaterTarget(task.callback),
            queue_epoch=None,
            retry=RetryPolicy(
                max_attempts=task.retry + 1, backoff_base=LATER_BACKOFF_BASE, backoff_max=LATER_BACKOFF_MAX
            ),
        )
        return self._store_new([message], now)[0][0]

    def later_delete(self, doc: Any) -> None:
        message_id = validation.later_id(doc)
        message = self.get(LATER_NAMESPACE, message_id)
        if message.status in (Status.DELIVERED, Status.FAILED, Status.EXPIRED):
            raise NotFoundError(f"task {message_id} has finished")
        self.cancel(LATER_NAMESPACE, message_id)

    def later_query(self, doc: Any) -> Message:
        return self.get(LATER_NAMESPACE, validation.later_id(doc))

    def _check_target(self, target: Target | None, field: str) -> None:
        if isinstance(target, SqsTarget):
            settings = self.ctx.settings
            reserved = (settings.timer_queue_url, settings.timer_dlq_url)
            why = sqs_targets.refusal(target.queue_url, SqsTargetRule.parse(settings.sqs_targets), reserved=reserved)
            if why:
                raise ValidationError(f"{field}.queue_url", why)
            return
        if self.ctx.settings.allow_private_callbacks or not isinstance(target, (HttpTarget, LaterTarget)):
            return
        try:
            self.ctx.check_url(target.url, allow_private=False)
        except ValidationError as exc:
            raise ValidationError(field, exc.detail) from exc
