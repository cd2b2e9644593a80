"""Delivery control use cases behind the REST API: pause, resume, attempt history, redelivery, an ordered queue's
keys (v1.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core import admission, attempts, delivery_control, lifecycle, redelivery
from hourglass.core.attempts import Attempt
from hourglass.core.delivery_control import PAUSE_SETTLE
from hourglass.core.handoff import Placement
from hourglass.core.model import DEFAULT_PRIORITY, Message, Queue
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError
from hourglass.service import ordering as ordered
from hourglass.service import transitions
from hourglass.service.context import Context
from hourglass.service.messages import Messages


class StorageUsed(storage.Queues, storage.Attempts, storage.KeyOrders, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


class Control:
    def __init__(self, ctx: Context, messages: Messages) -> None:
        self.ctx = ctx
        self.store: StorageUsed = ctx.store
        self.messages = messages

    def pause(self, name: str) -> Queue:
        self.messages.queues.get(name)
        queue = self.store.set_paused(name, True)
        # Dispatchers decide a start on a queue read at most 1 s old: after this wait, none that
        # starts can have read the queue before the pause was committed.
        self.ctx.sleep(PAUSE_SETTLE.total_seconds())
        return queue

    def resume(self, name: str) -> Queue:
        """Held timers come back within `delivery_control.PAUSE_RECHECK` and start, in due order per batch."""
        self.messages.queues.get(name)
        return self.store.set_paused(name, False, self.ctx.clock())

    def attempts(self, queue: str, message_id: str) -> list[Attempt]:
        message = self.messages.get(queue, message_id)  # 404 when unknown
        return attempts.merged(self.store.list_attempts(queue, message_id), message.final_attempt)

    def redeliver(self, queue_name: str, message_id: str, doc: Any) -> Message:
        queue = self.messages.queues.get(queue_name)
        now = self.ctx.clock()
        request = redelivery.redeliver_request(doc, now)
        message = self.messages.get(queue_name, message_id)
        asked = request.due(now)
        change = lifecycle.redeliver(message, admission.opening(message, queue, asked), asked)
        admission.check(change.message, queue)
        rate = delivery_control.rates(delivery_control.of(queue))

        def write(_: Message, placement: Placement) -> Message:
            return transitions.redeliver(self.ctx, message, change, placement)

        try:
            return self.ctx.handoff.hand_off(change.message, now, rate, write)
        except StaleVersionError as exc:
            raise ConflictError(f"message {message_id} changed; try again") from exc

    def key(self, queue_name: str, flow_key: str) -> dict[str, object]:
        """`GET .../keys/{flow_key}`: its head, how many wait behind it, whether it is held."""
        self.messages.queues.get(queue_name)
        admission.check_flow(flow_key or None, DEFAULT_PRIORITY)  # "": the key of messages without one
        return ordered.key_doc(self.ctx, queue_name, flow_key, self.store.key_order(queue_name, flow_key))

    def release(self, queue_name: str, flow_key: str) -> dict[str, object]:
        """`POST .../keys/{flow_key}/release`: a held key goes on with its next message; 404 if none is held."""
        self.messages.queues.get(queue_name)
        admission.check_flow(flow_key or None, DEFAULT_PRIORITY)  # "": the key of messages without one
        state = ordered.release(self.ctx, queue_name, flow_key, self.ctx.clock())
        if state is None:
            raise NotFoundError(f"key {flow_key!r} of queue {queue_name} holds nothing")
        return ordered.key_doc(self.ctx, queue_name, flow_key, state)

    def blocked(self, queue_name: str, messages: Sequence[Message]) -> dict[str, str]:
        """`blocked_by` of the messages that wait behind another of their key (an ordered queue's)."""
        if not messages:
            return {}
        queue = self.store.get_queue(queue_name, consistent=False)
        return ordered.blocked(self.ctx, queue, messages, self.ctx.clock())
