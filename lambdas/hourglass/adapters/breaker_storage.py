"""The circuit breaker's counters: BREAKER_SHARDS items per queue, resume and time bucket, in the queue's
partition, a dispatcher batch's outcomes one ADD on one of them; and the self-pause: the conditional update of the queue
item, in one transaction with the `queue.paused` notice it owes (an outbox entry, so that a writer dying right
after still has it sent)."""

from __future__ import annotations

import random
from datetime import datetime

from hourglass.adapters.items import KEEP_FV, checked, fv_value, n, queue_key, queue_paused_to_item, s
from hourglass.adapters.table import Table
from hourglass.core import keys
from hourglass.core.circuit_breaker import Tally
from hourglass.core.failure_notice import QueuePaused
from hourglass.core.timestamps import to_ms
from hourglass.errors import StaleVersionError


class BreakerStorage(Table):
    def count_outcome(
        self, queue: str, since: datetime | None, bucket: int, *, attempts: int, failures: int, expire_at: int
    ) -> None:
        """One write unit: the bucket's attempts and failures go up, created when absent."""
        self._guard(
            "update_item",
            TableName=self.table,
            # Any of the bucket's items: the window's read sums them.
            Key={
                "pk": s(queue),
                "sk": s(keys.breaker_sk(_since_ms(since), bucket, random.randrange(keys.BREAKER_SHARDS))),
            },
            UpdateExpression=f"ADD attempts :one, failures :f SET expire_at = :e, {KEEP_FV}",
            ExpressionAttributeValues={
                ":one": n(attempts),
                ":f": n(failures),
                ":e": n(expire_at),
                **fv_value("breaker"),
            },
        )

    def window_tally(self, queue: str, since: datetime | None, first: int, last: int) -> Tally:
        """The sum of the buckets first..last of the current resume: one Query of (BUCKETS + 1) x BREAKER_SHARDS
        small items (about 14 KB). Eventually consistent, at half the read units: it runs after each dispatcher batch
        with failures (a queue at 10,000 deliveries/s reads at most 100 times a second, 200 units), and a tally a
        moment old only trips the breaker a batch later."""
        low, high = keys.breaker_range(_since_ms(since), max(0, first), last)
        got = self._guard(
            "query",
            TableName=self.table,
            KeyConditionExpression="pk = :q AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":q": s(queue),
                ":lo": s(low),
                ":hi": s(high),
            },
        )
        items = [checked("breaker", item) for item in got.get("Items", [])]
        return Tally(
            sum(int(item["attempts"]["N"]) for item in items), sum(int(item["failures"]["N"]) for item in items)
        )

    def trip(self, since: datetime | None, paused: QueuePaused, *, notify: bool) -> bool:
        """Pauses the running queue `paused.queue` with `paused.reason`, and when `notify` stores the notice it
        owes, in one transaction; False when it was paused or resumed meanwhile (so of concurrent dispatchers
        exactly one trips it, and owes the notice)."""
        values = {
            ":t": {"BOOL": True},
            ":f": {"BOOL": False},
            ":r": s(paused.reason),
            ":zero": n(0),
            ":one": n(1),
        }
        condition = "attribute_exists(pk) AND (attribute_not_exists(paused) OR paused = :f)"
        if since is None:
            condition += " AND attribute_not_exists(resumed_at)"
        else:
            condition += " AND resumed_at = :since"
            values[":since"] = n(to_ms(since))
        pause = {
            "Key": queue_key(paused.queue),
            "UpdateExpression": "SET paused = :t, paused_reason = :r, version = if_not_exists(version, :zero) + :one",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        stale = f"queue {paused.queue} changed"
        if not notify:
            # Nothing owed: the plain conditional update (1 WU) instead of a one-item transaction (2 WU).
            return self._updated(stale, **pause)
        notice = {"Put": {"TableName": self.table, "Item": queue_paused_to_item(paused)}}
        try:
            self._conditional(
                "transact_write_items", stale, TransactItems=[{"Update": {"TableName": self.table, **pause}}, notice]
            )
        except StaleVersionError:
            return False
        return True


def _since_ms(since: datetime | None) -> int:
    return 0 if since is None else to_ms(since)
