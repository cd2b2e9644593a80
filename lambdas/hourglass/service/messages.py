"""Message use cases behind the REST API: create, read, list, cancel, reschedule."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.adapters import storage
from hourglass.adapters.message_storage import cursor_after
from hourglass.core import admission, delivery_control, lifecycle, limits, schedule, validation
from hourglass.core.admission import Fields, admit
from hourglass.core.document import message_doc
from hourglass.core.handoff import Placement
from hourglass.core.ids import is_valid_id, new_id
from hourglass.core.lifecycle import can_cancel, can_edit
from hourglass.core.model import LATER_NAMESPACE, Message, Queue, Status
from hourglass.core.pacing import Rates
from hourglass.core.schedule import SweepKeys
from hourglass.core.validation import ListOrder
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError, ValidationError
from hourglass.service import targets, transitions
from hourglass.service.context import Context
from hourglass.service.failure_notices import Owed
from hourglass.service.queues import Queues

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Messages

DEDUP_WINDOW = timedelta(hours=24)
EDIT_ATTEMPTS = 3


class Messages:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store: StorageUsed = ctx.store
        self.queues = Queues(ctx)

    # messages -----------------------------------------------------------------------------
    def create(self, queue_name: str, doc: Any) -> list[tuple[Message, bool]]:
        queue = self.queues.get(queue_name)
        now = self.ctx.clock()
        requests = validation.message_batch(doc, queue.settings, now)
        for index, request in enumerate(requests):
            targets.check_allowed(self.ctx, request.target, f"messages[{index}].target")
        ids = [new_id(queue.partitions) for _ in requests]
        messages = [admit(queue, request, now, ids[i], Fields.in_batch(i)) for i, request in enumerate(requests)]
        stored = self.store_new(messages, now, rate=delivery_control.rates(delivery_control.of(queue)))
        self.ctx.spreading.took(queue, len(messages), now)
        return stored

    def store_new(
        self, messages: list[Message], now: datetime, rate: Rates | None = None
    ) -> list[tuple[Message, bool]]:
        """Dedup messages are written first (with a lease), then every timer goes out at once; the
        other items are written last, with index keys only if their timers were refused. A rate-limited
        queue's timers get pacing slots in due order (one pacing write)."""
        # One due after its expiry is stored expired: its failure notice rides on its put.
        notices = {m.id: transitions.owed_at_admission(self.ctx, m, now) for m in messages if m.status.finished}
        firsts: dict[str, Message] = {}  # by dedup id: a later one of the same request is its duplicate
        for message in messages:
            if message.dedup_id is not None:
                firsts.setdefault(message.dedup_id, message)
        plain = [message for message in messages if message.dedup_id is None]
        stored: dict[str, tuple[Message, bool]] = {}  # by id: what a dedup message's write found

        def write_first(message: Message, placement: Placement) -> Message | None:
            leased = replace(message, claimed_until=placement.lease)
            keys = _outbox(notices, message) or placement.keys
            first_id = self.store.put_with_dedup(leased, keys, now=now, window=DEDUP_WINDOW)
            if first_id is not None:
                stored[message.id] = (self.store.get_message(message.queue, first_id) or message, True)
                return None
            stored[message.id] = (leased, False)
            return leased

        def write(placed: list[tuple[Message, SweepKeys | None]]) -> None:
            self.store.put_messages([(message, keys or _outbox(notices, message)) for message, keys in placed])

        self.ctx.handoff.ingest(plain, now, rate, write, first=list(firsts.values()), write_first=write_first)
        results = [self._result(message, firsts, stored) for message in messages]
        for message, duplicate in results:
            if not duplicate:
                self.ctx.metrics.count("Scheduled", queue=message.queue)
                if message.id in notices:
                    transitions.admitted(self.ctx, message, notices[message.id], now)
        return results

    @staticmethod
    def _result(
        message: Message, firsts: dict[str, Message], stored: dict[str, tuple[Message, bool]]
    ) -> tuple[Message, bool]:
        """What one message of a request became: itself, or the message its dedup id already names."""
        if message.dedup_id is None:
            return message, False
        first = firsts[message.dedup_id]
        return stored[first.id] if first is message else (stored[first.id][0], True)

    def get(self, queue: str, message_id: str) -> Message:
        if queue != LATER_NAMESPACE:
            validation.queue_name(queue)
        message = self.store.get_message(queue, message_id) if is_valid_id(message_id) else None
        if message is None:
            raise NotFoundError(f"message {message_id} does not exist in queue {queue}")
        return message

    def list(self, queue_name: str, params: dict[str, str] | None) -> tuple[list[Message], str | None]:
        query = validation.list_query(params)
        kept = {ListOrder.CREATED: self.ctx.settings.order_created, ListOrder.DUE: self.ctx.settings.order_due}
        if query.order is not None and not kept[query.order]:
            order = query.order.value
            raise ValidationError("order", f"{order} is not kept by this stack (its hourglass:order_{order} is false)")
        queue = self.queues.get(queue_name)
        found, cursor = self.store.list_messages(
            queue_name,
            status=query.status,
            limit=query.limit,
            cursor=query.cursor,
            schedule=query.schedule,
            notice=query.notice,
            flow_key=query.flow_key,
            order=query.order,
            partitions=queue.partitions,
        )
        # Contract v1.1: a page may hold fewer than `limit`, so that it fits Lambda's 6 MB response.
        fit = limits.page_length([message_doc(m) for m in found])
        if fit < len(found):
            return found[:fit], cursor_after(found[fit - 1], query.order)
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
        return transitions.cancel(self.ctx, message, self.ctx.clock())

    def patch(self, queue_name: str, message_id: str, doc: Any) -> Message:
        queue = self.queues.get(queue_name)
        for _ in range(EDIT_ATTEMPTS):
            message = self.get(queue_name, message_id)
            if not can_edit(message.status):
                raise ConflictError(f"message {message_id} is {message.status.value}, not pending")
            now = self.ctx.clock()
            edit = validation.message_patch(doc, queue.settings, now)
            admission.check(replace(message, body=edit.body) if edit.has_body else message, queue)
            try:
                return self._apply_patch(message, edit, now, delivery_control.rates(delivery_control.of(queue)), queue)
            except StaleVersionError:
                continue
        raise ConflictError(f"message {message_id} keeps changing; try again")

    def deliver_now(self, queue_name: str, message_id: str) -> Message:
        """A pending message becomes due now: the PATCH `{"delay": 0}` it is (409 unless pending)."""
        return self.patch(queue_name, message_id, {"delay": 0})

    def _apply_patch(
        self,
        message: Message,
        edit: validation.MessagePatch,
        now: datetime,
        rate: Rates | None = None,
        queue: Queue | None = None,
    ) -> Message:
        due, asked = message.due_at, message.scheduled
        if edit.delay is not None or edit.deliver_at is not None:
            asked = schedule.due_time(now, delay=edit.delay, deliver_at=edit.deliver_at, default_delay=0)
            due = admission.opening(message, queue, asked)
        body = edit.body if edit.has_body else message.body
        retention = self.ctx.settings.retention
        change = lifecycle.reschedule(message, due=due, body=body, now=now, retention=retention, scheduled=asked)
        return self.ctx.handoff.hand_off(
            change.message,
            now,
            rate,
            lambda _, placement: transitions.revise(self.ctx, message, change, placement, now, new_body=edit.has_body),
        )


def _outbox(notices: dict[str, Owed | None], message: Message) -> SweepKeys | None:
    notice = notices.get(message.id)
    return None if notice is None else notice.keys
