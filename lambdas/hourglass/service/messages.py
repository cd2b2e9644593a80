"""Queue and message use cases behind the REST API: create, read, list, cancel, reschedule."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.adapters.store import DueEntry, cursor_after
from hourglass.adapters.timer_queue import Scheduled, Timer
from hourglass.core import limits, schedule, sqs_targets, validation
from hourglass.core.admission import admit
from hourglass.core.document import message_doc
from hourglass.core.ids import new_id
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
from hourglass.core.schedule import SweepKeys
from hourglass.core.sqs_targets import SqsTargetRule
from hourglass.core.timestamps import to_ms
from hourglass.errors import (
    ConflictError,
    NotFoundError,
    StaleVersionError,
    StoreError,
    TimerQueueError,
    ValidationError,
)
from hourglass.logs import log
from hourglass.service.context import Context

DEDUP_WINDOW = timedelta(hours=24)
LATER_SETTINGS = QueueSettings(max_delay=validation.MAX_HORIZON)
EDIT_ATTEMPTS = 3
DELETE_QUEUE_BUDGET = 500


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
        created_at = existing.created_at if existing else self.ctx.clock()
        queue = Queue(name=name, settings=settings, created_at=created_at)
        return queue, self.store.put_queue(queue)

    def get_queue(self, name: str) -> Queue:
        validation.queue_name(name)
        queue = self.store.get_queue(name, consistent=True)
        if queue is None:
            raise NotFoundError(f"queue {name} does not exist")
        return queue

    def delete_queue(self, name: str) -> None:
        self.get_queue(name)
        self.store.delete_queue(name)
        # The dispatcher cancels whatever this pass leaves: its queue is gone.
        cursor = None
        for _ in range(DELETE_QUEUE_BUDGET // 100):
            pending, cursor = self.store.list_messages(name, status=Status.PENDING, limit=100, cursor=cursor)
            for message in pending:
                self._try_cancel(message)
            if cursor is None:
                return

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
        return self._store_new(messages, now)

    def _new_message(self, queue: Queue, request: NewMessage, now: datetime) -> Message:
        return admit(queue, request, now, new_id())

    def _keys(self, message: Message) -> SweepKeys:
        return schedule.sweep_keys(
            message.id, message.due_at, shards=self.ctx.settings.shards, bucket_seconds=self.ctx.settings.bucket_seconds
        )

    def _hands_off(self, message: Message, now: datetime) -> bool:
        settings = self.ctx.settings
        return message.status is Status.PENDING and schedule.hands_off_now(
            message.due_at, now, settings.lookahead, settings.handoff_safety
        )

    def _timer(self, message: Message, now: datetime) -> Scheduled:
        timer = Timer(message.queue, message.id, message.version, to_ms(message.due_at), to_ms(now))
        return Scheduled(timer, schedule.timer_delay(message.due_at, now))

    def _store_new(self, messages: list[Message], now: datetime) -> list[tuple[Message, bool]]:
        results: dict[int, tuple[Message, bool]] = {}
        plain: list[tuple[int, Message]] = []
        timers: list[Scheduled] = []
        seen_dedup: dict[str, Message] = {}
        for index, message in enumerate(messages):
            if message.dedup_id is None:
                plain.append((index, message))
            elif message.dedup_id in seen_dedup:
                results[index] = (seen_dedup[message.dedup_id], True)
            else:
                stored, duplicate = self._store_dedup(message, now, timers)
                seen_dedup[message.dedup_id] = stored
                results[index] = (stored, duplicate)
        handoff = {m.id for _, m in plain if self._hands_off(m, now)}
        timers.extend(self._timer(m, now) for _, m in plain if m.id in handoff)
        fallback = self._send_or_fallback(timers) if timers else False
        if fallback:
            self._release([m for m, duplicate in results.values() if not duplicate and m.claimed_until])
        entries = []
        for index, message in plain:
            waits_for_sweep = message.status is Status.PENDING and (message.id not in handoff or fallback)
            entries.append((message, self._keys(message) if waits_for_sweep else None))
            results[index] = (message, False)
        self.store.put_messages(entries)
        for _, message in plain:
            self.ctx.metrics.count("Scheduled", queue=message.queue)
        return [results[i] for i in range(len(messages))]

    def _send_or_fallback(self, timers: list[Scheduled]) -> bool:
        """Send hand-off timers; if SQS refuses, the messages wait in the due index instead."""
        try:
            self.ctx.timers.send_all(timers)
        except TimerQueueError as exc:
            log("handoff_fallback", count=len(timers), error=str(exc))
            self.ctx.metrics.count("HandoffFallback", len(timers))
            return True
        self.ctx.metrics.count("HandedOff", len(timers))
        return False

    def _release(self, leased: list[Message]) -> None:
        """Gives back the leases of stored messages whose timers SQS refused: the next sweep takes them."""
        for message in leased:
            assert message.claimed_until is not None
            entry = DueEntry(message.queue, message.id, message.version, to_ms(message.due_at))
            try:
                self.store.release(entry, lease_until=message.claimed_until)
            except StoreError as exc:
                # The lease then runs out and the recovery sweep hands the message off.
                log("release_failed", id=message.id, queue=message.queue, error=str(exc))

    def _store_dedup(self, message: Message, now: datetime, timers: list[Scheduled]) -> tuple[Message, bool]:
        hands_off = self._hands_off(message, now)
        if hands_off:
            # Stored with due-index keys and a lease: if the timer below is never sent, the
            # recovery sweep hands it off when the lease runs out.
            message = replace(message, claimed_until=schedule.claim_lease(message.due_at, now))
        keys = self._keys(message) if message.status is Status.PENDING else None
        first_id = self.store.put_with_dedup(message, keys, now=now, window=DEDUP_WINDOW)
        if first_id is not None:
            original = self.store.get_message(message.queue, first_id)
            return (original or message, True)
        if hands_off:
            timers.append(self._timer(message, now))
        self.ctx.metrics.count("Scheduled", queue=message.queue)
        return message, False

    def get(self, queue: str, message_id: str) -> Message:
        if queue != LATER_NAMESPACE:
            validation.queue_name(queue)
        message = self.store.get_message(queue, message_id) if _plausible_id(message_id) else None
        if message is None:
            raise NotFoundError(f"message {message_id} does not exist in queue {queue}")
        return message

    def list(self, queue_name: str, params: dict[str, str] | None) -> tuple[list[Message], str | None]:
        query = validation.list_query(params)
        self.get_queue(queue_name)
        found, cursor = self.store.list_messages(
            queue_name, status=query.status, limit=query.limit, cursor=query.cursor
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
        now = self.ctx.clock()
        cancelled = replace(message, status=Status.CANCELLED, version=message.version + 1, claimed_until=None)
        self.store.update_message(
            cancelled,
            expected_version=message.version,
            expected_status=Status.PENDING,
            expire_at=now + timedelta(days=self.ctx.settings.retention_days),
        )
        self.ctx.metrics.count("Cancelled", queue=message.queue)
        return cancelled

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
                return self._apply_patch(message, edit, now)
            except StaleVersionError:
                continue
        raise ConflictError(f"message {message_id} keeps changing; try again")

    def _apply_patch(self, message: Message, edit: validation.MessagePatch, now: datetime) -> Message:
        due = message.due_at
        if edit.delay is not None or edit.deliver_at is not None:
            due = schedule.due_time(now, delay=edit.delay, deliver_at=edit.deliver_at, default_delay=0)
        expired = message.expires_at is not None and due > message.expires_at
        updated = replace(
            message,
            body=edit.body if edit.has_body else message.body,
            due_at=due,
            version=message.version + 1,
            status=Status.EXPIRED if expired else Status.PENDING,
            claimed_until=None,
        )
        hands_off = self._hands_off(updated, now)
        if hands_off:
            updated = replace(updated, claimed_until=schedule.claim_lease(due, now))
        self.store.update_message(
            updated,
            expected_version=message.version,
            expected_status=Status.PENDING,
            sweep=None if expired else self._keys(updated),
        )
        if hands_off:
            self.ctx.timers.send([self._timer(updated, now)])
        return updated

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
            raise ValidationError(field, exc.message.removeprefix("url: ")) from exc


def _plausible_id(message_id: str) -> bool:
    return 1 <= len(message_id) <= 64 and message_id.isalnum()
