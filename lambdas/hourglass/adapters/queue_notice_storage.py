"""Notices about a queue itself still owed (`queue.paused`): an item each in the queue's partition, indexed in
the failure-notice outbox until sent; deleted with the queue's other items when its life ends."""

from __future__ import annotations

import contextlib

from hourglass.adapters.items import n, queue_notice_key, queue_paused_from_item, queue_paused_to_item
from hourglass.adapters.table import Table
from hourglass.core.failure_notice import QueuePaused
from hourglass.errors import StaleVersionError


class QueueNoticeStorage(Table):
    def get_queue_paused(self, queue: str, notice_id: str) -> QueuePaused | None:
        got = self._guard("get_item", TableName=self.table, Key=queue_notice_key(queue, notice_id), ConsistentRead=True)
        item = got.get("Item")
        return None if item is None else queue_paused_from_item(item)

    def clear_queue_paused(self, paused: QueuePaused) -> None:
        """Sent (or given up): the item goes, unless another try moved it on meanwhile."""
        key = queue_notice_key(paused.queue, paused.id)
        with contextlib.suppress(StaleVersionError):
            self._delete_at_version(key, paused.version, f"notice {paused.id} changed")

    def record_queue_paused(self, paused: QueuePaused) -> bool:
        """A failed try: the notice's next try (`paused.notice`) replaces the stored version before it; False
        when that version is gone (sent, given up or deleted with its queue)."""
        try:
            self._conditional(
                "put_item",
                f"notice {paused.id} changed",
                TableName=self.table,
                Item=queue_paused_to_item(paused),
                ConditionExpression="version = :v",
                ExpressionAttributeValues={":v": n(paused.version - 1)},
            )
        except StaleVersionError:
            return False
        return True
