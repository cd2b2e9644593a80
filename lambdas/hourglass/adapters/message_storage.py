"""Messages in the table and bucket (`Messages`, `MessageChanges`, `Bodies`, `Counters` and a message's `Notices` in
`adapters.storage`): new ones with their dedup records and bodies, reads, lists, every conditional write of a version
(its notice's outbox entry included) and the counters they add to, with the items `adapters.items` builds."""

from __future__ import annotations

import contextlib
import heapq
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from hourglass import contract
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.items import (
    COUNT_SHARDS,
    BodyId,
    BodyVersion,
    CountKey,
    Item,
    ListFilter,
    NewMessageWrite,
    bodies_to_read,
    body_item_expiry,
    count_changes,
    count_update,
    counts_from_items,
    live_dedup_owner,
    message_from_item,
    message_key,
    n,
    new_message_write,
    order_keys,
    s,
    version_write,
    version_write_with_body,
    with_bodies,
)
from hourglass.adapters.table import (
    Meter,
    Table,
    check_failed,
    code_of,
    decode_cursor,
    decode_index_cursor,
    encode_cursor,
    format_guard,
)
from hourglass.core import body_placement, failure_notice
from hourglass.core.body_placement import BodyLimits, Placement
from hourglass.core.keys import MESSAGE_PREFIX, OUTBOX_PK, count_prefix, message_pks
from hourglass.core.lifecycle import Change, DeliveryStart
from hourglass.core.model import Message, Notice, NoticeStatus, Queue, Status
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import to_ms
from hourglass.core.validation import ListOrder
from hourglass.errors import StaleVersionError, StoreError
from hourglass.logs import log

# A dedup transaction cancelled by throttling or a conflicting transaction is tried this often.
DEDUP_ATTEMPTS = 4
DEDUP_BACKOFF = 0.05
# A status-filtered list reads pages of this many items, and at most this many pages per request.
LIST_PAGE = 200
LIST_READ_PAGES = 5

BATCH_GET = 100
# How long status changes counted together (`counts_batched`) wait at most before their ADD is written: how old
# the queue document's counts may be (`counts_as_of`), besides the write's own retries.
COUNT_FLUSH_SECONDS = 5


class CountBatch:
    """Status changes counted together (docs/design.md, "Counts"): deltas by queue life, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], dict[Status, int]] = {}

    def add(self, deltas: dict[CountKey, dict[Status, int]]) -> None:
        with self._lock:
            for (queue, epoch, _), counts in deltas.items():
                pending = self._pending.setdefault((queue, epoch), {})
                for status, delta in counts.items():
                    pending[status] = pending.get(status, 0) + delta

    def take(self) -> dict[tuple[str, int], dict[Status, int]]:
        """What it holds, emptied."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending


class MessageStorage(Table):
    # Message bodies (docs/design.md, "Message bodies"): S3 only once a body store is configured.
    _body_store_factory: Callable[[], BodyStore] | None = None
    _body_store: BodyStore | None = None
    retention: timedelta = timedelta(days=7)

    def __init__(self, table: str, client: Any = None, meter: Meter | None = None) -> None:
        super().__init__(table, client, meter)
        # The CountBatch the calling thread counts into (counts_batched, counting_into); none: counts at once.
        self._counting = threading.local()

    def configure_bodies(self, *, retention: timedelta, bucket: str | None = None, body_store: Any = None) -> None:
        """Retention of finished messages (body item TTLs) and the S3 bucket, built on first use."""
        self.retention = retention
        if body_store is not None:
            self._body_store = body_store
        elif bucket:
            self._body_store_factory = lambda: BodyStore(bucket)

    @property
    def body_limits(self) -> BodyLimits:
        has_s3 = self._body_store is not None or self._body_store_factory is not None
        return body_placement.DEFAULT_LIMITS if has_s3 else body_placement.NO_BUCKET_LIMITS

    @property
    def bodies(self) -> BodyStore:
        if self._body_store is None:
            if self._body_store_factory is None:
                raise StoreError("a message body is kept in S3 but no body bucket is configured")
            self._body_store = self._body_store_factory()
        return self._body_store

    def new_items(self, message: Message, keys: SweepKeys | None) -> list[Item]:
        """The items storing a new message writes; an S3 body is put first, so no item names a missing body."""
        return self._new_write(message, keys).items

    def _new_write(self, message: Message, keys: SweepKeys | None, until: datetime | None = None) -> NewMessageWrite:
        """`until`: the dedup window's end, for a message with a dedup id."""
        write = new_message_write(message, keys, retention=self.retention, limits=self.body_limits, dedup_until=until)
        self._put_s3(write.body)
        return write

    def _put_s3(self, body: BodyVersion) -> None:
        if body.keep_days is not None:
            self.bodies.put(body.queue, body.message_id, body.ref.version, body.body, keep_days=body.keep_days)

    # new messages -------------------------------------------------------------------------
    def put_messages(self, entries: Iterable[tuple[Message, SweepKeys | None]]) -> None:
        entries = list(entries)
        self._batch_write([{"PutRequest": {"Item": item}} for m, keys in entries for item in self.new_items(m, keys)])
        self.count_new(message for message, _ in entries)

    def count_new(self, messages: Iterable[Message]) -> None:
        """Counts stored new messages: put_messages' own counting, for a writer that batches its own puts
        (the bulk loader), once per batch after its writes."""
        self._count([(message, None) for message in messages])

    def put_with_dedup(
        self,
        message: Message,
        keys: SweepKeys | None,
        *,
        now: datetime,
        window: timedelta,
        sleep: Callable[[float], None] = time.sleep,
    ) -> str | None:
        """Store `message` unless its dedup id was used within `window` in this queue's epoch; then the first id.

        Only a failed condition on a live dedup record of the same queue epoch is a duplicate. A
        transaction cancelled for anything else (throttling, a conflicting transaction) is tried
        again a few times with backoff, then raises StoreError (503): never a false duplicate.
        """
        assert message.dedup_id is not None
        write = self._new_write(message, keys, now + window)
        # A re-created queue (a new epoch) starts with no dedup history: its records of the old epoch
        # are overwritten. Records written before epochs were stored have none and keep their meaning.
        # A record of a newer release is never written over: its owner is then read, and refused (503).
        guard, guard_value = format_guard("dedup")
        condition = f"(attribute_not_exists(pk) OR dedup_until < :now OR queue_epoch <> :epoch) AND {guard}"
        values = {":now": n(to_ms(now)), ":epoch": n(write.epoch_ms), **guard_value}
        for attempt in range(DEDUP_ATTEMPTS):
            try:
                self._call(
                    "transact_write_items",
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": write.dedup,
                                "ConditionExpression": condition,
                                "ExpressionAttributeValues": values,
                            }
                        },
                        *({"Put": {"TableName": self.table, "Item": item}} for item in write.items),
                    ],
                )
                self._count([(message, None)])
                return None
            except ClientError as exc:
                if code_of(exc) != "TransactionCanceledException":
                    raise StoreError(f"DynamoDB transact_write_items failed: {exc}") from exc
                reasons = [str(r.get("Code", "")) for r in exc.response.get("CancellationReasons", [])]
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    first = self._live_dedup(write, now)
                    if first is not None:
                        self._drop_body(write.body)
                        return first
            if attempt + 1 < DEDUP_ATTEMPTS:
                sleep(DEDUP_BACKOFF * 2**attempt)
        self._drop_body(write.body)
        raise StoreError(f"dedup transaction for {message.dedup_id!r} cancelled {DEDUP_ATTEMPTS} times")

    def put_occurrence(self, message: Message, keys: SweepKeys | None) -> bool:
        """Store a schedule occurrence, its body placed as any new message's, unless its id is stored already;
        True when this call stored it. The message item and its body item are written in one transaction."""
        items = self._new_write(message, keys).items
        puts = [{"Put": {"TableName": self.table, "Item": item}} for item in items[1:]]
        first = {"TableName": self.table, "Item": items[0], "ConditionExpression": "attribute_not_exists(pk)"}
        try:
            if puts:
                self._call("transact_write_items", TransactItems=[{"Put": first}, *puts])
            else:
                self._call("put_item", **first)
        except ClientError as exc:
            reasons = [str(r.get("Code", "")) for r in exc.response.get("CancellationReasons", [])]
            if code_of(exc) == "ConditionalCheckFailedException" or reasons[:1] == ["ConditionalCheckFailed"]:
                return False  # stored already; an S3 body just put is the same body under the same key
            raise StoreError(f"DynamoDB write of occurrence {message.id} failed: {exc}") from exc
        self._count([(message, None)])
        return True

    def _live_dedup(self, write: NewMessageWrite, now: datetime) -> str | None:
        """The message id of the live dedup record of this queue epoch, if there is one."""
        got = self._guard("get_item", TableName=self.table, Key=write.dedup_key, ConsistentRead=True)
        return live_dedup_owner(got.get("Item"), now, write.epoch_ms)

    # reads --------------------------------------------------------------------------------
    def get_message(self, queue: str, message_id: str, *, consistent: bool = True) -> Message | None:
        got = self._guard(
            "get_item", TableName=self.table, Key=message_key(queue, message_id), ConsistentRead=consistent
        )
        return self._with_bodies([got["Item"]])[0] if "Item" in got else None

    def list_messages(
        self,
        queue: str,
        *,
        status: Status | None,
        limit: int,
        cursor: str | None,
        schedule: str | None = None,
        notice: NoticeStatus | None = None,
        flow_key: str | None = None,
        order: ListOrder | None = None,
        partitions: int = 1,
    ) -> tuple[list[Message], str | None]:
        """A page of up to `limit` messages, merged from every partition of the queue's messages (`partitions`: the
        queue's, `keys.message_pks`); with a filter, at most LIST_READ_PAGES reads of each partition.

        Filtered reads use pages of LIST_PAGE items whatever is left to find, so the cost follows
        what is read, not one Query per stored item; a page may come back short, with a cursor.
        """
        wanted = ListFilter(status, schedule, notice, flow_key)
        pks = message_pks(queue, partitions)
        if order is not None:
            return self._list_ordered(queue, pks, order, wanted, limit=limit, cursor=cursor)
        values: dict[str, Any] = {":hi": s(MESSAGE_PREFIX + "~")}
        names: dict[str, str] = {}
        filters = []
        if status is not None:
            filters.append("#st = :st")
            names["#st"] = "status"
            values[":st"] = s(status.value)
        if schedule is not None:
            filters.append("#sch = :sch")
            names["#sch"] = "schedule"
            values[":sch"] = s(schedule)
        if flow_key is not None:
            filters.append("flow_key = :fk")
            values[":fk"] = s(flow_key)
        if notice is not None:
            # A pending notice is an outbox entry on the item; an abandoned one, a mark the outbox left.
            pending = notice is NoticeStatus.PENDING
            filters.append("begins_with(sweep_pk, :outbox)" if pending else "notice_status = :notice")
            values[":outbox" if pending else ":notice"] = s(OUTBOX_PK if pending else notice.value)
        # After the cursor's message in every partition: ids hold only hex digits and "-", all above "!".
        low = decode_cursor(cursor, queue, MESSAGE_PREFIX, spread=True)["sk"]["S"] + "!" if cursor else MESSAGE_PREFIX
        if low > values[":hi"]["S"]:
            return [], None
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {**values, ":lo": s(low)},
            "Limit": _page_size(limit if not filters else max(limit, LIST_PAGE), len(pks)),
            **({"ExpressionAttributeNames": names} if names else {}),
            **({"FilterExpression": " AND ".join(filters)} if filters else {}),
        }
        cap = LIST_READ_PAGES if filters else None
        streams = [self._rows(_in_partition(request, pk), cap, _by_sk, _sk_order) for pk in pks]
        found, more = _merge(streams, limit)
        messages = self._with_bodies(found)
        if isinstance(more, dict):
            return messages, encode_cursor(more)
        return messages, cursor_after(messages[-1]) if more and messages else None

    def _list_ordered(
        self, queue: str, pks: tuple[str, ...], order: ListOrder, wanted: ListFilter, *, limit: int, cursor: str | None
    ) -> tuple[list[Message], str | None]:
        """A page in `order` from its keys-only index, merged from each partition's entries: each index page's
        messages are read (BatchGetItem, strongly consistent) and filtered here, in order; at most LIST_READ_PAGES
        index pages of each partition per request."""
        index, sort, kind = contract.LIST_ORDER_INDEXES[order]
        start = decode_index_cursor(cursor, queue, sort, kind) if cursor else None
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": "list_pk = :q",
            "Limit": _page_size(limit if wanted.empty else max(limit, LIST_PAGE), len(pks)),
        }

        def order_of(key: Item) -> tuple[str, ...]:
            return _index_order(key, sort, kind)

        def rows(page: dict[str, Any]) -> list[tuple[tuple[str, ...], Item]]:
            entries = page.get("Items", [])
            found = self._get_items([{"pk": e["pk"], "sk": e["sk"]} for e in entries])
            picked = []
            for entry in entries:
                item = found.get((entry["pk"]["S"], entry["sk"]["S"]))
                # An entry filtered out still marks how far its partition was read.
                picked.append((order_of(entry), item if item is not None and wanted.matches(item) else {}))
            return picked

        streams = []
        for pk in pks:
            partition = _in_partition(request, pk)
            after: tuple[str, ...] | None = None
            if start is not None and start["list_pk"]["S"] == pk:
                stream = self._rows(partition, LIST_READ_PAGES, rows, order_of, start)
            else:
                if start is not None:
                    # Another partition of the queue's: from the cursor's sort value on, past the cursor itself.
                    partition["KeyConditionExpression"] += f" AND {sort} >= :after"
                    partition["ExpressionAttributeValues"][":after"] = start[sort]
                    after = order_of(start)
                stream = self._rows(partition, LIST_READ_PAGES, rows, order_of, None, after)
            streams.append(stream)
        found, more = _merge(streams, limit)
        messages = [message_from_item(item) for item in found]
        if isinstance(more, dict):
            return self.read_bodies(messages), encode_cursor(more)
        return self.read_bodies(messages), cursor_after(messages[-1], order) if more and messages else None

    def _rows(
        self,
        request: dict[str, Any],
        cap: int | None,
        rows_of: Callable[[dict[str, Any]], list[tuple[tuple[str, ...], Item]]],
        order_of: Callable[[Item], tuple[str, ...]],
        start: dict[str, Any] | None = None,
        after: tuple[str, ...] | None = None,
    ) -> Iterator[tuple[tuple[str, ...], Item | dict[str, Any] | None]]:
        """One partition's rows in order, read a page at a time as the merge asks: (order, item), an empty item for
        one its filter left out; at `cap` pages with more to read, (order, the key to go on from) as its last row."""
        for reads, page in enumerate(self._pages(request, start), 1):
            for order, item in rows_of(page):
                if after is None or order > after:
                    yield order, item
            last = page.get("LastEvaluatedKey")
            if last and cap is not None and reads >= cap:
                yield order_of(last), {"resume": last}
                return

    def _get_items(self, wanted: list[Item]) -> dict[tuple[str, str], Item]:
        """The items of these table keys that exist, by (pk, sk): BatchGetItem, strongly consistent."""
        found: dict[tuple[str, str], Item] = {}
        for first in range(0, len(wanted), BATCH_GET):
            request: dict[str, Any] = {self.table: {"Keys": wanted[first : first + BATCH_GET], "ConsistentRead": True}}
            while request:
                answer = self._guard("batch_get_item", RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    found[(item["pk"]["S"], item["sk"]["S"])] = item
                request = answer.get("UnprocessedKeys") or {}
        return found

    # versions -----------------------------------------------------------------------------
    def cancel(self, change: Change, *, last_op: str | None = None) -> Message:
        """The body goes with it: an S3 object now (free), a body item by TTL at the message's own."""
        write = version_write(change, last_op=last_op)
        self._put_version(change, write.item)
        body = write.body
        if body is not None and body.ref.placement is Placement.S3:
            self.bodies.delete(body.queue, body.message_id, body.ref.version)
        elif body is not None and change.expire_at is not None:
            self._extend(body, change.expire_at)
        return write.message

    def reschedule(
        self, change: Change, keys: SweepKeys | None, *, new_body: bool = False, last_op: str | None = None
    ) -> Message:
        """With `new_body`, the body is written as version v+1 first; the old one is removed once the
        message names the new one, the new one when the conditional write fails (no orphan either way)."""
        if not new_body:
            return self.await_retry(change, keys, last_op=last_op)
        write = version_write_with_body(
            change, keys, last_op=last_op, retention=self.retention, limits=self.body_limits
        )
        assert write.new_body is not None
        self._put_s3(write.new_body)
        if write.new_body.item is not None:
            self._guard("put_item", TableName=self.table, Item=write.new_body.item)
        try:
            self._put_version(change, write.item)
        except BaseException:
            self._drop_body(write.new_body)
            raise
        self._drop_body(write.body)
        return write.message

    def await_retry(
        self,
        change: Change,
        keys: SweepKeys | None,
        *,
        last_op: str | None = None,
        fences: Sequence[dict[str, Any]] = (),
    ) -> Message:
        """Pending again (a retry, a new due time, a redelivery): a body that would go first is kept longer.
        `fences`: conditional updates of other items written in one transaction with it (all or nothing)."""
        write = version_write(change, keys, last_op=last_op)
        if write.body is not None:
            self._keep_body_until(write.body, change.message.created_at, change.message.due_at)
        self._put_version(change, write.item, fences)
        return write.message

    def _keep_body_until(self, body: BodyVersion, created_at: datetime, finished_at: datetime) -> None:
        """A body that would go before a message finishing at `finished_at` is kept longer first."""
        until = body_placement.body_expiry(finished_at, self.retention)
        if body.ref.placement is Placement.S3:
            needed = body_placement.keep_days(created_at, until)
            kept = self.bodies.kept_days(body.queue, body.message_id, body.ref.version)
            if kept is not None and kept < needed:
                self.bodies.keep(body.queue, body.message_id, body.ref.version, needed)
            return
        got = self._guard("get_item", TableName=self.table, Key=body.key, ConsistentRead=True)
        expires = body_item_expiry(got["Item"]) if "Item" in got else None
        if expires is not None and not body_placement.outlives(expires, finished_at, self.retention):
            self._extend(body, until)

    def finish(self, change: Change, outbox: SweepKeys | None = None, *, last_op: str | None = None) -> Message:
        """The final write; `outbox`: due-index keys of a failure notice still to send, in the same write."""
        write = version_write(change, outbox, last_op=last_op)
        self._put_version(change, write.item)
        return write.message

    def clear_notice(self, queue: str, message_id: str, version: int) -> None:
        """The notice of this version is sent: its outbox entry leaves the due index (a no-op once it has)."""
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                f"message {message_id} changed",
                TableName=self.table,
                Key=message_key(queue, message_id),
                UpdateExpression="REMOVE sweep_pk, sweep_sk",
                ConditionExpression="version = :v AND attribute_exists(sweep_pk)",
                ExpressionAttributeValues={":v": n(version)},
            )

    def record_notice(self, message: Message, notice: Notice) -> bool:
        """A failed try of the notice of `message` (this version): a pending notice moves its outbox entry to
        its next try, an abandoned one leaves the outbox; both keep its tries and error on the item. False
        when the item has moved on (a newer version, or the entry is gone): nothing is written then."""
        entry = failure_notice.entry_keys(message.id, notice.next_try_at) if notice.next_try_at else None
        values = {
            ":v": n(message.version),
            ":outbox": s(OUTBOX_PK),
            ":tries": n(notice.tries),
            ":error": s(notice.last_error or ""),
            ":finished": n(to_ms(notice.finished_at)) if notice.finished_at else n(0),
        }
        kept = "notice_tries = :tries, notice_error = :error, notice_finished = :finished"
        if entry is not None:
            update = f"SET sweep_sk = :sk, {kept}"
            values[":sk"] = s(entry.sk)
        else:
            update = f"SET notice_status = :abandoned, {kept} REMOVE sweep_pk, sweep_sk"
            values[":abandoned"] = s(NoticeStatus.ABANDONED.value)
        return self._updated(
            f"message {message.id} changed",
            Key=message_key(message.queue, message.id),
            UpdateExpression=update,
            ConditionExpression="version = :v AND begins_with(sweep_pk, :outbox)",
            ExpressionAttributeValues=values,
        )

    def _put_version(self, change: Change, item: Item, fences: Sequence[dict[str, Any]] = ()) -> None:
        """Write the new version's item over the stored one if that one still has the expected version and status
        (and, with `fences`, their updates' conditions hold too: one transaction)."""
        put = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": "version = :v AND #st = :st",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": {":v": n(change.expected_version), ":st": s(change.expected_status.value)},
        }
        stale = f"message {change.message.id} changed"
        if not fences:
            self._conditional("put_item", stale, **put)
        else:
            actions = [{"Put": put}, *({"Update": fence} for fence in fences)]
            self._conditional("transact_write_items", stale, TransactItems=actions)
        self._count([(change.message, change.expected_status)])

    def begin_delivery(self, queue: str, message_id: str, start: DeliveryStart) -> Message:
        """pending(v) -> delivering with a lease and one more attempt, or take over an expired lease.

        Leaves the due index (its keys are removed); StaleVersionError when neither holds, NewerFormatError (nothing
        written) when a newer release wrote the message.
        """
        guard, guard_value = format_guard("message")
        try:
            answer = self._conditional(
                "update_item",
                f"message {message_id} is not in the expected state",
                TableName=self.table,
                Key=message_key(queue, message_id),
                UpdateExpression=(
                    "SET #st = :delivering, claimed_until = :lease, "
                    "version = if_not_exists(version, :zero) + :one, attempts = if_not_exists(attempts, :zero) + :one "
                    "REMOVE sweep_pk, sweep_sk"
                ),
                ConditionExpression=(
                    f"((#st = :pending AND version = :v) OR (#st = :delivering AND claimed_until < :now)) AND {guard}"
                ),
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":pending": s(Status.PENDING.value),
                    ":v": n(start.version),
                    ":delivering": s(Status.DELIVERING.value),
                    ":now": n(to_ms(start.now)),
                    ":lease": n(to_ms(start.lease_until)),
                    ":one": n(1),
                    ":zero": n(0),
                    **guard_value,
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except StaleVersionError as exc:
            check_failed("message", exc)
            raise
        message = self._with_bodies([answer["Attributes"]])[0]
        # Begun from pending at the version its timer named; else a takeover (delivering before as after).
        self._count([(message, Status.PENDING if message.version == start.version + 1 else Status.DELIVERING)])
        return message

    # status counters ----------------------------------------------------------------------
    def counts(self, queue: Queue) -> dict[str, int]:
        """The counts of this life of `queue` by status: one Query of its COUNT_SHARDS counter items."""
        prefix = count_prefix(to_ms(queue.created_at))
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :c)",
            "ExpressionAttributeValues": {":q": s(queue.name), ":c": s(prefix)},
            "ConsistentRead": True,
        }
        return counts_from_items([item for page in self._pages(request) for item in page.get("Items", [])])

    def _count(self, changes: list[tuple[Message, Status | None]]) -> None:
        """After the writes of these status changes: one ADD per queue life they change, on one of its counter
        items picked at random; in a thread counting into a CountBatch, added to it instead. Never raises: the
        change is written, and a count it misses stays off (docs/design.md, "Counts")."""
        deltas = count_changes(changes, shard=random.randrange(COUNT_SHARDS))
        batch: CountBatch | None = getattr(self._counting, "batch", None)
        if batch is not None:
            batch.add(deltas)
            return
        self._add_counts(deltas)

    @contextlib.contextmanager
    def counts_batched(self) -> Iterator[CountBatch]:
        """A CountBatch the calling thread counts into (other threads through `counting_into`): its status changes
        summed per queue life, written as one ADD each every COUNT_FLUSH_SECONDS and when it ends."""
        batch = CountBatch()
        stop = threading.Event()
        ticker = threading.Thread(target=self._flush_every, args=(batch, stop), name="counts", daemon=True)
        ticker.start()
        try:
            with self.counting_into(batch):
                yield batch
        finally:
            stop.set()
            ticker.join()
            self.flush_counts(batch)

    @contextlib.contextmanager
    def counting_into(self, batch: CountBatch) -> Iterator[None]:
        """The calling thread's status changes go to `batch` while inside."""
        previous = getattr(self._counting, "batch", None)
        self._counting.batch = batch
        try:
            yield
        finally:
            self._counting.batch = previous

    def _flush_every(self, batch: CountBatch, stop: threading.Event) -> None:
        while not stop.wait(COUNT_FLUSH_SECONDS):
            self.flush_counts(batch)

    def flush_counts(self, batch: CountBatch) -> None:
        """Writes what `batch` holds, on one counter item of each queue life."""
        shard = random.randrange(COUNT_SHARDS)
        self._add_counts({(queue, epoch, shard): counts for (queue, epoch), counts in batch.take().items()})

    def _add_counts(self, deltas: dict[CountKey, dict[Status, int]]) -> None:
        for key, counts in deltas.items():
            counts = {status: delta for status, delta in counts.items() if delta}
            if not counts:
                continue
            try:
                self._guard("update_item", TableName=self.table, **count_update(key, counts))
            except StoreError as exc:
                log("count_failed", queue=key[0], error=str(exc))

    # bodies -------------------------------------------------------------------------------
    def _with_bodies(self, items: list[Item]) -> list[Message]:
        return self.read_bodies([message_from_item(item) for item in items])

    def read_bodies(self, messages: list[Message]) -> list[Message]:
        """`messages` with their bodies: body items in one BatchGetItem (strongly consistent), S3 bodies one
        GetObject each; inline bodies cost nothing more."""
        wanted = bodies_to_read(messages)
        in_items = {(b.key["pk"]["S"], b.key["sk"]["S"]): b for b in wanted if b.ref.placement is Placement.ITEM}
        items = self._get_items([body.key for body in in_items.values()])
        found: dict[BodyId, Item] = {in_items[key].ident: item for key, item in items.items()}
        texts = {
            b.ident: self.bodies.get_text(b.queue, b.message_id, b.ref.version)
            for b in wanted
            if b.ref.placement is Placement.S3
        }
        return with_bodies(messages, found, texts)

    def _extend(self, body: BodyVersion, until: datetime) -> None:
        with contextlib.suppress(StaleVersionError):
            self._conditional(
                "update_item",
                "body item is gone",
                TableName=self.table,
                Key=body.key,
                UpdateExpression="SET expire_at = :e",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":e": n(int(until.timestamp()))},
            )

    def _drop_body(self, body: BodyVersion | None) -> None:
        """Removes one body version (S3 DeleteObject is free; a body item goes by DeleteItem)."""
        if body is None or body.ref.placement is Placement.INLINE:
            return
        if body.ref.placement is Placement.S3:
            self.bodies.delete(body.queue, body.message_id, body.ref.version)
        else:
            self._guard("delete_item", TableName=self.table, Key=body.key)


def cursor_after(message: Message, order: ListOrder | None = None) -> str:
    """The `next_cursor` of a list page (in `order`) that ends with `message`."""
    key = message_key(message.queue, message.id)
    if order is None:
        return encode_cursor(key)
    _, sort, _ = contract.LIST_ORDER_INDEXES[order]
    return encode_cursor({**key, **{k: v for k, v in order_keys(message).items() if k in ("list_pk", sort)}})


Row = tuple[tuple[str, ...], Item]


def _page_size(limit: int, partitions: int) -> int:
    """Each partition's Query Limit: the page's own for one, else a share of it (twice even, at least 10), as the
    merge asks for more of a partition only when it has used up what it read."""
    return limit if partitions == 1 else max(10, -(-2 * limit // partitions))


def _in_partition(request: dict[str, Any], pk: str) -> dict[str, Any]:
    """`request` (its key condition on `:q`) for one partition."""
    return {**request, "ExpressionAttributeValues": {**request.get("ExpressionAttributeValues", {}), ":q": s(pk)}}


def _by_sk(page: dict[str, Any]) -> list[Row]:
    return [(_sk_order(item), item) for item in page.get("Items", [])]


def _sk_order(key: Item) -> tuple[str, ...]:
    return (key["sk"]["S"],)


def _index_order(key: Item, sort: str, kind: str) -> tuple[str, ...]:
    """Where an index entry (or key) sorts in an ordered list: its sort value, then its table key (unique)."""
    value = key[sort][kind]
    return (f"{int(value):020d}" if kind == "N" else value, key["pk"]["S"], key["sk"]["S"])


def _merge(streams: list[Iterator[tuple[tuple[str, ...], Any]]], limit: int) -> tuple[list[Item], bool | Item]:
    """Up to `limit` message items from the partitions' ordered rows, and whether more follow; or, where a partition
    stopped at its read cap before that, the key to go on from (every row before it is in the page)."""
    merged = heapq.merge(*streams, key=lambda row: row[0])
    found: list[Item] = []
    for _, item in merged:
        if "resume" in item:
            return found, item["resume"]
        if "id" not in item:
            continue  # left out by the filter
        found.append(item)
        if len(found) == limit:
            return found, next(merged, None) is not None
    return found, False
