"""Sweep bookkeeping in the table: the due index, hand-off claims, watermarks and shard progress."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from hourglass import contract
from hourglass.adapters.items import (
    KEEP_FV,
    STATE_KEY,
    bucket_key,
    checked,
    due_entry_from_item,
    fv_value,
    message_from_item,
    message_key,
    n,
    queue_notice_key,
    s,
    shard_key,
    sweep_state_from_items,
)
from hourglass.adapters.table import Table, check_failed, format_guard
from hourglass.core import failure_notice
from hourglass.core.due_width import Record
from hourglass.core.handoff import Claim, DueEntry
from hourglass.core.keys import BUCKETS_PK, SWEEPER_PK, bucket_of_pk
from hourglass.core.model import Message, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.sweep_state import ShardProgress, SweepState
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import NewerFormatError, StaleVersionError
from hourglass.logs import log


class SweepStorage(Table):
    def query_due(self, pk: str, low: str, high: str, *, limit: int = 500) -> Iterator[DueEntry]:
        request = {
            "TableName": self.table,
            "IndexName": contract.DUE_INDEX,
            "KeyConditionExpression": "sweep_pk = :p AND sweep_sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":p": s(pk), ":lo": s(low), ":hi": s(high)},
            "Limit": limit,
        }
        for page in self._pages(request):
            yield from (due_entry_from_item(item) for item in page.get("Items", []))

    def indexed_buckets(self) -> set[int]:
        """Every bucket that holds a due-index entry: one Scan of the sparse index, keys only.

        For the first sweep of a stack (no sweep state yet), so that it covers everything ever
        indexed without querying every empty bucket since the epoch.
        """
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": contract.DUE_INDEX,
            "ProjectionExpression": "sweep_pk",
        }
        buckets: set[int] = set()
        while True:
            page = self._guard("scan", **request)
            found = (bucket_of_pk(item["sweep_pk"]["S"]) for item in page.get("Items", []))
            buckets.update(bucket for bucket in found if bucket is not None)
            if not page.get("LastEvaluatedKey"):
                return buckets
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def claim(
        self, entry: DueEntry, *, now: datetime, lease_until: datetime, move_to: SweepKeys | None = None
    ) -> Message | None:
        """Claim a due message for hand-off: the message as claimed (the write returns it at no extra
        capacity), or None when another sweeper has it or it changed.

        `move_to`: new due-index keys in the same write (a paced message's slot in a later bucket, so
        that the recovery sweep looks at it only once its slot has passed). A message a newer release wrote is
        left as it is (None too: its entry stays in the due index, and a later sweep meets it again)."""
        moved = {} if move_to is None else {":spk": s(move_to.pk), ":ssk": s(move_to.sk)}
        guard, guard_value = format_guard("message")
        try:
            answer = self._conditional(
                "update_item",
                f"message {entry.id} is claimed or changed",
                TableName=self.table,
                Key=message_key(entry.queue, entry.id),
                UpdateExpression="SET claimed_until = :lease" + (", sweep_pk = :spk, sweep_sk = :ssk" if moved else ""),
                ConditionExpression=(
                    "version = :v AND #st = :pending AND (attribute_not_exists(claimed_until) OR claimed_until < :now)"
                    f" AND {guard}"
                ),
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":v": n(entry.version),
                    ":pending": s(Status.PENDING.value),
                    ":now": n(to_ms(now)),
                    ":lease": n(to_ms(lease_until)),
                    **moved,
                    **guard_value,
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except StaleVersionError as exc:
            try:
                check_failed("message", exc)
            except NewerFormatError as newer:
                log("newer_item_format", id=entry.id, queue=entry.queue, error=str(newer))
            return None
        return message_from_item(answer["Attributes"])

    def release(self, claim: Claim) -> None:
        """Give a claim back (its timer was not sent) so the next sweep takes it at once."""
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                f"message {claim.entry.id} changed",
                TableName=self.table,
                Key=message_key(claim.entry.queue, claim.entry.id),
                UpdateExpression="REMOVE claimed_until",
                ConditionExpression="version = :v AND claimed_until = :lease",
                ExpressionAttributeValues={":v": n(claim.entry.version), ":lease": n(to_ms(claim.lease))},
            )

    def bucket_width(self, bucket: int) -> int | None:
        """One strongly consistent read: a writer records a width before it writes into the new shards."""
        answer = self._guard("get_item", TableName=self.table, Key=bucket_key(bucket), ConsistentRead=True)
        width = checked("due_width", answer.get("Item", {})).get("width")
        return None if width is None else int(width["N"])

    def add_bucket_writes(self, bucket: int, entries: int, *, now: datetime, expire_at: int) -> Record:
        answer = self._guard(
            "update_item",
            TableName=self.table,
            Key=bucket_key(bucket),
            UpdateExpression=f"ADD written :n SET #ttl = :ttl, since = if_not_exists(since, :now), {KEEP_FV}",
            ExpressionAttributeNames={"#ttl": contract.TTL_ATTRIBUTE},
            ExpressionAttributeValues={
                ":n": n(entries),
                ":ttl": n(expire_at),
                ":now": n(to_ms(now)),
                **fv_value("due_width"),
            },
            ReturnValues="ALL_NEW",
        )
        item = checked("due_width", answer.get("Attributes", {}))
        width = item.get("width")
        return Record(
            int(item["written"]["N"]), None if width is None else int(width["N"]), from_ms(int(item["since"]["N"]))
        )

    def wide_buckets(self, alive_after: int) -> dict[int, int]:
        """Every bucket recorded wider than the deployment's shards whose record outlives `alive_after` (epoch s):
        what a release without widths (before 1.3.0) would not sweep (`devstack.rollback`)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :b",
            "FilterExpression": "attribute_exists(width) AND #ttl > :t",
            "ExpressionAttributeNames": {"#ttl": contract.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":b": s(BUCKETS_PK), ":t": n(alive_after)},
        }
        return {
            int(item["sk"]["S"]): int(item["width"]["N"])
            for page in self._pages(request)
            for item in page.get("Items", [])
        }

    def due_entries(self, pk: str) -> Iterator[DueEntry]:
        """Every entry of one due-index partition (a bucket's shard), in due order."""
        request = {
            "TableName": self.table,
            "IndexName": contract.DUE_INDEX,
            "KeyConditionExpression": "sweep_pk = :p",
            "ExpressionAttributeValues": {":p": s(pk)},
        }
        for page in self._pages(request):
            yield from (due_entry_from_item(item) for item in page.get("Items", []))

    def move_due_entry(self, entry: DueEntry, from_pk: str, to_pk: str) -> bool:
        """Moves a due-index entry (a message's, or a queue notice's in the outbox) to another partition, unless
        its item changed since the entry was read (its new state put it where it belongs)."""
        paused = failure_notice.is_queue_paused(entry.id)
        return self._updated(
            f"{'notice' if paused else 'message'} {entry.id} changed",
            Key=queue_notice_key(entry.queue, entry.id) if paused else message_key(entry.queue, entry.id),
            UpdateExpression="SET sweep_pk = :to",
            ConditionExpression="version = :v AND sweep_pk = :from",
            ExpressionAttributeValues={":v": n(entry.version), ":from": s(from_pk), ":to": s(to_pk)},
        )

    def widen_bucket(self, bucket: int, width: int, *, expire_at: int) -> None:
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                f"bucket {bucket} is at least {width} wide",
                TableName=self.table,
                Key=bucket_key(bucket),
                UpdateExpression=f"SET width = :w, #ttl = :ttl, {KEEP_FV}",
                ConditionExpression="attribute_not_exists(width) OR width < :w",
                ExpressionAttributeNames={"#ttl": contract.TTL_ATTRIBUTE},
                ExpressionAttributeValues={":w": n(width), ":ttl": n(expire_at), **fv_value("due_width")},
            )

    def load_sweep_state(self, default: SweepState) -> SweepState:
        """The state item and the shard items of fan-out invocations, in one strongly consistent Query."""
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": s(SWEEPER_PK)},
            "ConsistentRead": True,
        }
        items = [item for page in self._pages(request) for item in page.get("Items", [])]
        return sweep_state_from_items(items, default)

    def save_sweep_state(self, state: SweepState) -> None:
        """Move the watermarks forward only: a slower concurrent sweeper never moves them back.

        One write when both move forward (the usual case); otherwise each on its own.
        """
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                "sweep state moved on",
                TableName=self.table,
                Key=STATE_KEY,
                UpdateExpression=(
                    "SET watermark = :w, recovery_watermark = :r, last_due = :d, last_end = :e, "
                    f"last_run = :run, last_workers = :k, last_complete = :c, {KEEP_FV}"
                ),
                ConditionExpression=(
                    "(attribute_not_exists(watermark) OR watermark <= :w) AND "
                    "(attribute_not_exists(recovery_watermark) OR recovery_watermark <= :r)"
                ),
                ExpressionAttributeValues={
                    ":w": n(state.watermark),
                    ":r": n(state.recovery_watermark),
                    ":d": n(state.last_due),
                    ":e": n(state.last_end),
                    ":run": n(state.last_run),
                    ":k": n(state.last_workers),
                    ":c": {"BOOL": state.last_complete},
                    **fv_value("sweep"),
                },
            )
            return
        for attr, value in (("watermark", state.watermark), ("recovery_watermark", state.recovery_watermark)):
            self._forward(STATE_KEY, f"SET {attr} = :w", f"attribute_not_exists({attr}) OR {attr} < :w", n(value))

    def save_shard_progress(self, progress: Mapping[int, ShardProgress]) -> None:
        """Record a fan-out invocation's progress per shard, forward only (one small item per shard)."""
        for shard, done in progress.items():
            self._forward(
                shard_key(shard),
                "SET watermark = :w, due = :d, #run = :run, complete = :c",
                "attribute_not_exists(watermark) OR watermark <= :w",
                n(done.watermark),
                names={"#run": "run"},
                values={":d": n(done.due), ":run": n(done.run), ":c": {"BOOL": done.complete}},
            )

    def _forward(
        self,
        key: dict[str, Any],
        update: str,
        condition: str,
        watermark: dict[str, str],
        *,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> None:
        """An update that only moves a watermark forward; a newer one already stored wins silently."""
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                "watermark moved on",
                TableName=self.table,
                Key=key,
                UpdateExpression=f"{update}, {KEEP_FV}",
                ConditionExpression=condition,
                ExpressionAttributeValues={":w": watermark, **(values or {}), **fv_value("sweep")},
                **({"ExpressionAttributeNames": names} if names else {}),
            )
