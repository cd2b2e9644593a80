"""DynamoDB item layout of queues, messages, bodies, dedup records, schedules and sweeper state (DynamoDB JSON),
and what one write of a message takes (its items, its body placed, its dedup record), built in one call.

Shared by the store adapter, the bulk-scheduling job and the report job's export reader.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from hourglass import contract
from hourglass.core import attempts, delivery_control, formats, json_body, keys
from hourglass.core.body_placement import DEFAULT_LIMITS, BodyLimits, BodyRef, Placement, body_expiry, keep_days, place
from hourglass.core.cron import parse_cron
from hourglass.core.document import control_doc
from hourglass.core.failure_notice import QueuePaused, entry_keys
from hourglass.core.handoff import DueEntry
from hourglass.core.keys import shard_of
from hourglass.core.lifecycle import Change
from hourglass.core.limits import json_bytes
from hourglass.core.model import (
    DEFAULT_PRIORITY,
    AwsTarget,
    CircuitBreaker,
    DeliveryControl,
    EventBridgeTarget,
    FlowControl,
    HttpTarget,
    LambdaTarget,
    LaterTarget,
    Message,
    Notice,
    NoticeStatus,
    Ordering,
    Queue,
    QueueSettings,
    RetryPolicy,
    SnsTarget,
    SqsTarget,
    Status,
    StepFunctionsTarget,
    Target,
)
from hourglass.core.recurrence import CatchUp, Recurrence, Schedule
from hourglass.core.schedule import SweepKeys
from hourglass.core.sweep_state import ShardProgress, SweepState
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.core.window import Window, from_doc, to_doc

Item = dict[str, dict[str, Any]]


def message_key(queue: str, message_id: str) -> Item:
    return {"pk": {"S": keys.message_pk(queue, message_id)}, "sk": {"S": keys.message_sk(message_id)}}


def queue_key(name: str) -> Item:
    return {"pk": {"S": name}, "sk": {"S": keys.QUEUE_SK}}


def dedup_key(queue: str, dedup_id: str, partitions: int = 1) -> Item:
    """A dedup record's key in a queue spread over `partitions` when it is written (1: not spread)."""
    return {"pk": {"S": keys.dedup_pk(queue, dedup_id, partitions)}, "sk": {"S": keys.dedup_sk(dedup_id)}}


def dedup_to_item(queue: str, dedup_id: str, message_id: str, until: datetime) -> Item:
    """The record that makes `dedup_id` point at `message_id` until `until`; TTL removes it later. It is where the
    queue's dedup records were when the message was stored: its id says (a spread message's, `keys.spread_of`)."""
    return {
        **dedup_key(queue, dedup_id, keys.spread_of(message_id)),
        **fv("dedup"),
        "message_id": s(message_id),
        "dedup_until": n(to_ms(until)),
        "expire_at": n(int(until.timestamp()) + 3600),
    }


def fv(kind: str) -> Item:
    """The format attribute of a record of `kind` as this release writes it (core.formats)."""
    return {"fv": n(formats.FORMATS[kind])}


# An UpdateItem's SET clause for `fv` (its value `fv_value`): it writes this release's format on an item it creates
# and leaves the one an item has (a newer release's is never lowered).
KEEP_FV = "fv = if_not_exists(fv, :fv)"


def fv_value(kind: str) -> Item:
    return {":fv": n(formats.FORMATS[kind])}


def checked(kind: str, item: Item) -> Item:
    """`item` if this release reads its format; NewerFormatError (left as it is, retried later) if not."""
    formats.check(kind, _num(item, "fv"))
    return item


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": str(value)}


_dumps = json_body.encode


def target_to_json(target: Target) -> str:
    return _dumps(asdict(target))


def target_from_json(text: str) -> Target:
    return target_from_doc(json.loads(text))


def target_from_doc(stored: Mapping[str, Any]) -> Target:
    doc = dict(stored)
    kind = doc.pop("type")
    if kind == "http":
        return HttpTarget(**doc)
    if kind == "sqs":
        return SqsTarget(**doc)
    if kind == "later":
        return LaterTarget(**doc)
    return SERVICE_TARGET_TYPES[kind](**doc)


SERVICE_TARGET_TYPES: dict[str, type[AwsTarget]] = {
    "lambda": LambdaTarget,
    "sns": SnsTarget,
    "eventbridge": EventBridgeTarget,
    "stepfunctions": StepFunctionsTarget,
}


def message_to_item(message: Message, sweep: SweepKeys | None = None, *, body: BodyRef | None = None) -> Item:
    """The message item; with `body` (not inline) it carries only where its body is, not the body.
    Without `body` it keeps the message's own `body_ref` (a rewrite never puts a body back inline)."""
    body = body if body is not None else message.body_ref
    external = body is not None and body.placement is not Placement.INLINE
    item: Item = {
        **message_key(message.queue, message.id),
        **fv("message"),
        "id": s(message.id),
        "queue": s(message.queue),
        "status": s(message.status.value),
        **({"body_in": s(body.placement.value), "body_v": n(body.version)} if body and external else {}),
        **({} if external else {"body": s(_dumps(message.body))}),
        "created_at": n(to_ms(message.created_at)),
        "due_at": n(to_ms(message.due_at)),
        "version": n(message.version),
        "attempts": n(message.attempts),
    }
    optional: dict[str, dict[str, str] | None] = {
        "expires_at": n(to_ms(message.expires_at)) if message.expires_at else None,
        "delivered_at": n(to_ms(message.delivered_at)) if message.delivered_at else None,
        "finished_at": n(to_ms(message.finished_at)) if message.finished_at else None,
        "last_error": s(message.last_error) if message.last_error else None,
        "dedup_id": s(message.dedup_id) if message.dedup_id else None,
        "target": s(target_to_json(message.target)) if message.target else None,
        "queue_epoch": n(to_ms(message.queue_epoch)) if message.queue_epoch else None,
        "claimed_until": n(to_ms(message.claimed_until)) if message.claimed_until else None,
        "topic": s(message.topic) if message.topic else None,
        "retry": s(_dumps(asdict(message.retry))) if message.retry else None,
        "attempts_base": n(message.attempts_base) if message.attempts_base else None,
        "schedule": s(message.schedule) if message.schedule else None,
        "occurrence_at": n(to_ms(message.occurrence_at)) if message.occurrence_at else None,
        # Only when given, so an item without flow control is exactly as before (v1.2).
        "flow_key": s(message.flow_key) if message.flow_key is not None else None,
        "priority": n(message.priority) if message.priority != DEFAULT_PRIORITY else None,
        "scheduled_at": n(to_ms(message.scheduled)) if message.scheduled != message.due_at else None,
        "window": _window_text(message.window),
        "final_attempt": s(_dumps(attempts.to_record(message.final_attempt))) if message.final_attempt else None,
        "sweep_pk": s(sweep.pk) if sweep else None,
        "sweep_sk": s(sweep.sk) if sweep else None,
    }
    item.update({key: value for key, value in optional.items() if value is not None})
    item.update(list_keys(message))
    if message.redelivered:
        item["redelivered"] = {"BOOL": True}
    return item


def _num(item: Item, key: str) -> int | None:
    value = item.get(key)
    return None if value is None or "N" not in value else int(float(value["N"]))


def _time(item: Item, key: str) -> Any:
    ms = _num(item, key)
    return None if ms is None else from_ms(ms)


def _str(item: Item, key: str) -> str | None:
    value = item.get(key)
    return None if value is None or "S" not in value else str(value["S"])


def message_from_item(item: Item) -> Message:
    """The message; its body is None when kept elsewhere (`body_ref_of` says where)."""
    checked("message", item)
    target = _str(item, "target")
    retry = _str(item, "retry")
    return Message(
        id=item["id"]["S"],
        queue=item["queue"]["S"],
        body=json.loads(item["body"]["S"]) if "body" in item else None,
        status=Status(item["status"]["S"]),
        created_at=from_ms(int(item["created_at"]["N"])),
        due_at=from_ms(int(item["due_at"]["N"])),
        version=int(item["version"]["N"]),
        expires_at=_time(item, "expires_at"),
        attempts=_int(item, "attempts", 0),
        delivered_at=_time(item, "delivered_at"),
        finished_at=_time(item, "finished_at"),
        last_error=_str(item, "last_error"),
        dedup_id=_str(item, "dedup_id"),
        target=target_from_json(target) if target else None,
        queue_epoch=_time(item, "queue_epoch"),
        claimed_until=_time(item, "claimed_until"),
        topic=_str(item, "topic"),
        retry=RetryPolicy(**json.loads(retry)) if retry else None,
        attempts_base=_int(item, "attempts_base", 0),
        body_ref=body_ref_of(item),
        schedule=_str(item, "schedule"),
        occurrence_at=_time(item, "occurrence_at"),
        final_attempt=_final_attempt(item),
        notice=notice_of(item),
        redelivered="redelivered" in item,
        flow_key=_str(item, "flow_key"),
        priority=_int(item, "priority", DEFAULT_PRIORITY),
        scheduled_at=_time(item, "scheduled_at"),
        window=_window_of(item),
    )


def list_keys(message: Message) -> Item:
    """The keys of the list index (`contract.LIST_INDEX`): a list by due reads its queue's messages in
    the order of the time each was scheduled for, which a retry never changes, so the index entry is
    written once per message (and again only when it is rescheduled). `@later` messages are never listed."""
    if message.queue == keys.LATER_QUEUE:
        return {}
    list_pk = keys.message_pk(message.queue, message.id)  # a spread message's list entries are spread with it
    return {"list_pk": s(list_pk), "list_sk": s(keys.sort_key(to_ms(message.scheduled), message.id))}


def order_keys(message: Message) -> Item:
    """The attributes the list orders' indexes key `message` by (`list_pk` with `list_sk` or `created_at`)."""
    return {**list_keys(message), "created_at": n(to_ms(message.created_at))}


@dataclass(frozen=True)
class ListFilter:
    """What an ordered list keeps of the messages its index names (the unordered list filters in its Query)."""

    status: Status | None = None
    schedule: str | None = None
    notice: NoticeStatus | None = None
    flow_key: str | None = None

    @property
    def empty(self) -> bool:
        return self.status is None and self.schedule is None and self.notice is None and self.flow_key is None

    def matches(self, item: Item) -> bool:
        if self.status is not None and item["status"]["S"] != self.status.value:
            return False
        if self.schedule is not None and _str(item, "schedule") != self.schedule:
            return False
        if self.flow_key is not None and _str(item, "flow_key") != self.flow_key:
            return False
        notice = notice_of(item)
        return self.notice is None or (notice is not None and notice.status is self.notice)


def _window_text(window: Window | None) -> dict[str, str] | None:
    return None if window is None else s(_dumps(to_doc(window)))


def _window_of(item: Item) -> Window | None:
    text = _str(item, "window")
    return None if text is None else from_doc(json.loads(text))


def notice_of(item: Item) -> Notice | None:
    """The failure notice of a finished message's item: pending while its outbox entry is indexed (due at
    the entry's sort key), abandoned once the outbox gave it up; None otherwise (none owed, or sent)."""
    finished = _time(item, "notice_finished")
    tries, error = _int(item, "notice_tries", 0), _str(item, "notice_error") or None
    if keys.is_outbox_pk(_str(item, "sweep_pk")):
        next_try = from_ms(keys.split_sort_key(item["sweep_sk"]["S"])[0])
        return Notice(NoticeStatus.PENDING, tries, error, next_try, finished)
    if _str(item, "notice_status") == NoticeStatus.ABANDONED.value:
        return Notice(NoticeStatus.ABANDONED, tries, error, None, finished)
    return None


def queue_notice_key(queue: str, notice_id: str) -> Item:
    return {"pk": s(queue), "sk": s(keys.queue_notice_sk(notice_id))}


def queue_paused_to_item(paused: QueuePaused) -> Item:
    """A pending `queue.paused` notice: its own item, indexed in the outbox at its next try."""
    if paused.notice.next_try_at is None:
        raise ValueError("only a pending notice is stored")
    entry = entry_keys(paused.id, paused.notice.next_try_at)
    item = {
        **queue_notice_key(paused.queue, paused.id),
        **fv("notice"),
        "version": n(paused.version),
        "sweep_pk": s(entry.pk),
        "sweep_sk": s(entry.sk),
        "reason": s(paused.reason),
        "failure_ratio": n(paused.ratio),
        "paused_at": n(to_ms(paused.paused_at)),
        "notice_tries": n(paused.notice.tries),
    }
    if paused.epoch is not None:
        item["queue_epoch"] = n(to_ms(paused.epoch))
    if paused.notice.last_error:
        item["notice_error"] = s(paused.notice.last_error)
    return item


def queue_paused_from_item(item: Item) -> QueuePaused:
    checked("notice", item)
    paused_at = from_ms(int(item["paused_at"]["N"]))
    next_try = from_ms(keys.split_sort_key(item["sweep_sk"]["S"])[0])
    tries, error = _int(item, "notice_tries", 0), _str(item, "notice_error")
    return QueuePaused(
        queue=item["pk"]["S"],
        reason=item["reason"]["S"],
        ratio=float(item["failure_ratio"]["N"]),
        paused_at=paused_at,
        epoch=_time(item, "queue_epoch"),
        notice=Notice(NoticeStatus.PENDING, tries, error, next_try, paused_at),
        version=int(item["version"]["N"]),
    )


def _final_attempt(item: Item) -> attempts.Attempt | None:
    record = _str(item, "final_attempt")
    return None if record is None else attempts.from_record(item["id"]["S"], json.loads(record))


def queue_to_item(queue: Queue) -> Item:
    settings = queue.settings
    doc = asdict(settings)
    doc["target"] = asdict(settings.target) if settings.target else None
    control = delivery_control.of(queue)
    stored_control = control_to_stored(control)
    if stored_control:
        doc["control"] = stored_control
    return {
        **queue_key(queue.name),
        "fv": n(formats.queue_format(control.ordering is not None, queue.partitions > 1 or queue.slot_layout > 1)),
        "settings": s(_dumps(doc)),
        "created_at": n(to_ms(queue.created_at)),
        # Top level, so pause and resume are one small conditional update.
        "paused": {"BOOL": control.paused},
        "version": n(queue.version),
        **({"paused_reason": s(control.paused_reason)} if control.paused_reason else {}),
        **({"resumed_at": n(to_ms(control.resumed_at))} if control.resumed_at else {}),
        **({"pace_floor_us": n(control.pace_floor_us)} if control.pace_floor_us is not None else {}),
        **({"partitions": n(queue.partitions)} if queue.partitions > 1 else {}),
        **({"slot_layout": n(queue.slot_layout)} if queue.slot_layout > 1 else {}),
    }


def queue_from_item(item: Item) -> Queue:
    checked("queue", item)
    doc = json.loads(item["settings"]["S"])
    raw_target = doc.pop("target")
    raw_control = doc.pop("control", {})
    settings = QueueSettings(
        **{**doc, "retry": RetryPolicy(**doc["retry"])},
        target=target_from_doc(raw_target) if raw_target else None,
    )
    paused = bool(item.get("paused", {}).get("BOOL", False))
    control: DeliveryControl | None = replace(
        control_from_stored(raw_control, paused=paused),
        paused_reason=_str(item, "paused_reason") if paused else None,
        resumed_at=_time(item, "resumed_at"),
        pace_floor_us=_num(item, "pace_floor_us"),
    )
    if control == DeliveryControl():
        control = None  # the default control, as a queue built without one
    created_at = from_ms(int(item["created_at"]["N"]))
    version = _int(item, "version", 0)
    partitions, slot_layout = _int(item, "partitions", 1), _int(item, "slot_layout", 1)
    return Queue(item["pk"]["S"], settings, created_at, control, version, partitions, slot_layout)


def control_to_stored(control: DeliveryControl) -> dict[str, Any]:
    """What the queue item's settings JSON keeps of its control: what differs from the defaults, but
    `paused` (a top-level attribute)."""
    doc, defaults = control_doc(control), control_doc(DeliveryControl())
    top_level = ("paused", "paused_reason")
    return {key: value for key, value in doc.items() if value != defaults[key] and key not in top_level}


def control_from_stored(doc: Mapping[str, Any], *, paused: bool) -> DeliveryControl:
    """The control a queue item keeps, read as written: it was validated then, and is not again, so
    that tightening a bound never makes a stored queue unreadable."""
    rate, concurrency, destination = doc.get("rate_limit"), doc.get("max_concurrency"), doc.get("failure_destination")
    breaker = doc.get("circuit_breaker")
    failure_destination = None if destination is None else target_from_doc(destination)
    if isinstance(failure_destination, LaterTarget):
        raise ValueError("a failure destination is an http or sqs target")
    flow = doc.get("flow_control")
    return DeliveryControl(
        rate_limit=None if rate is None else float(rate),
        max_concurrency=None if concurrency is None else int(concurrency),
        timeout=float(doc.get("timeout", DeliveryControl().timeout)),
        failure_destination=failure_destination,
        paused=paused,
        flow_control=None if flow is None else _flow_control(flow),
        ordering=None if doc.get("ordering") is None else Ordering(**doc["ordering"]),
        window=from_doc(doc.get("window")),
        circuit_breaker=None if breaker is None else CircuitBreaker(**breaker),
    )


def _flow_control(doc: Mapping[str, Any]) -> FlowControl:
    rate, concurrency = doc.get("key_rate_limit"), doc.get("key_max_concurrency")
    return FlowControl(None if rate is None else float(rate), None if concurrency is None else int(concurrency))


# message bodies ------------------------------------------------------------------------------
body_text = json_body.encode  # a body as stored and delivered
body_size = json_bytes  # its size, as placement measures it


def body_ref_of(item: Item) -> BodyRef | None:
    """Where the body of a message item is kept; None when it is inline."""
    where = _str(item, "body_in")
    version = _num(item, "body_v")
    return None if where is None or version is None else BodyRef(Placement(where), version)


def place_body(message: Message, sweep: SweepKeys | None = None, limits: BodyLimits = DEFAULT_LIMITS) -> BodyRef:
    """Where `message`'s body goes, from the size of its item with `sweep` keys (the largest it is at
    ingest) and of the encoded body; the ref's version is the message's."""
    item = message_to_item(message, sweep)
    rest = item_size({k: v for k, v in item.items() if k != "body"})
    return BodyRef(place(body_size(message.body), rest, limits), message.version)


def body_key(queue: str, message_id: str, version: int) -> Item:
    return {"pk": {"S": keys.message_pk(queue, message_id)}, "sk": {"S": keys.body_sk(message_id, version)}}


def body_to_item(queue: str, message_id: str, version: int, body: Any, *, expire_at: datetime) -> Item:
    """A body item, written once; the table's TTL (`expire_at`, see core.body_placement.body_expiry)
    removes it for free instead of a DeleteItem billed by its size."""
    return {
        **body_key(queue, message_id, version),
        **fv("body"),
        "body": s(body_text(body)),
        "expire_at": n(int(expire_at.timestamp())),
    }


def body_from_item(item: Item) -> Any:
    checked("body", item)
    return json.loads(item["body"]["S"])


def body_item_expiry(item: Item) -> datetime:
    """When the table's TTL removes a body item (the dispatcher has it from its read: a retry that
    would outlive it extends it first, see core.body_placement.outlives)."""
    return datetime.fromtimestamp(int(checked("body", item)["expire_at"]["N"]), tz=UTC)


# what one write or read of a message takes -----------------------------------------------------
BodyId = tuple[str, str, int]  # queue, message id, body version


@dataclass(frozen=True)
class BodyVersion:
    """One version of a message's body where the table or the bucket keeps it (`ref`; inline: nowhere
    apart). Being written, it carries its body item (`item`) or its S3 object's body and lifecycle tag
    (`keep_days`)."""

    queue: str
    message_id: str
    ref: BodyRef
    key: Item  # its body item's key
    item: Item | None = None
    body: Any = None
    keep_days: int | None = None

    @property
    def ident(self) -> BodyId:
        return self.queue, self.message_id, self.ref.version


@dataclass(frozen=True)
class NewMessageWrite:
    """What storing a new message writes: an S3 body first (so that no message item ever names a body that
    is not there), then `items` in one write (the message item, then its body item). With a dedup id:
    the dedup record, its key, and the queue epoch that the record's condition compares."""

    items: list[Item]
    body: BodyVersion
    dedup: Item | None = None
    dedup_key: Item | None = None
    epoch_ms: int = 0


@dataclass(frozen=True)
class VersionWrite:
    """A new version of a stored message: the message as written, its item, the body the stored version
    names (`body`, None inline) and, when the version brings a body of its own (a PATCH), that body,
    written first (`new_body`)."""

    message: Message
    item: Item
    body: BodyVersion | None
    new_body: BodyVersion | None = None


def new_message_write(
    message: Message,
    sweep: SweepKeys | None = None,
    *,
    retention: timedelta,
    limits: BodyLimits = DEFAULT_LIMITS,
    dedup_until: datetime | None = None,
) -> NewMessageWrite:
    """Storing `message` with `sweep` keys: its body placed (a body item's TTL from the due time), and with
    `dedup_until` its dedup record, which carries the queue's epoch (a re-created queue has no history)."""
    ref = place_body(message, sweep, limits)
    body = _placed_body(message, ref, retention)
    written = [message_to_item(message, sweep, body=ref), *([body.item] if body.item else [])]
    if dedup_until is None or message.dedup_id is None:
        return NewMessageWrite(written, body)
    epoch = to_ms(message.queue_epoch) if message.queue_epoch is not None else 0
    dedup = {**dedup_to_item(message.queue, message.dedup_id, message.id, dedup_until), "queue_epoch": n(epoch)}
    key = dedup_key(message.queue, message.dedup_id, keys.spread_of(message.id))
    return NewMessageWrite(written, body, dedup, key, epoch)


def version_write(change: Change, sweep: SweepKeys | None = None, *, last_op: str | None = None) -> VersionWrite:
    """The item of `change`'s new version with `sweep` keys; `last_op`: the bulk operation writing it (how
    a page redone after a crash knows it is done). A finished version carries its TTL."""
    message = change.message
    item = message_to_item(message, sweep)
    if last_op is not None:
        item["last_op"] = s(last_op)
    if change.expire_at is not None:
        item[contract.TTL_ATTRIBUTE] = n(int(change.expire_at.timestamp()))
    return VersionWrite(message, item, _stored_body(message))


def version_write_with_body(
    change: Change, sweep: SweepKeys | None, *, last_op: str | None, retention: timedelta, limits: BodyLimits
) -> VersionWrite:
    """`version_write` for a version whose body is new: placed as a body version of its own (v + 1 of the
    stored one), which the written item names instead of the stored body."""
    message = change.message
    ref = place_body(replace(message, body_ref=None), None, limits)
    named = replace(message, body_ref=ref if ref.placement is not Placement.INLINE else None)
    write = version_write(replace(change, message=named), sweep, last_op=last_op)
    return replace(write, body=_stored_body(message), new_body=_placed_body(message, ref, retention))


def bodies_to_read(messages: list[Message]) -> list[BodyVersion]:
    """The bodies of `messages` kept apart from their items (in body items or S3)."""
    return [body for body in map(_stored_body, messages) if body is not None]


def with_bodies(
    messages: list[Message], body_items: Mapping[BodyId, Item], s3_texts: Mapping[BodyId, str | None]
) -> list[Message]:
    """`messages` with the bodies read for them (by `BodyVersion.ident`); a body that is gone reads as None."""
    result = []
    for message in messages:
        body = _stored_body(message)
        if body is None:
            result.append(message)
        elif body.ref.placement is Placement.ITEM:
            item = body_items.get(body.ident)
            result.append(replace(message, body=body_from_item(item) if item else None))
        else:
            text = s3_texts.get(body.ident)
            result.append(replace(message, body=json.loads(text) if text is not None else None))
    return result


def live_dedup_owner(item: Item | None, now: datetime, epoch_ms: int) -> str | None:
    """The message id a dedup record points at while it is live in this queue epoch. Records written before
    epochs were stored have none and keep their meaning."""
    if item is None or int(checked("dedup", item)["dedup_until"]["N"]) < to_ms(now):
        return None
    if "queue_epoch" in item and int(item["queue_epoch"]["N"]) != epoch_ms:
        return None
    return str(item["message_id"]["S"])


def _stored_body(message: Message) -> BodyVersion | None:
    ref = message.body_ref
    if ref is None or ref.placement is Placement.INLINE:
        return None
    return BodyVersion(message.queue, message.id, ref, body_key(message.queue, message.id, ref.version))


def _placed_body(message: Message, ref: BodyRef, retention: timedelta) -> BodyVersion:
    """`message`'s body written now at `ref`: a body item, or an S3 object tagged to be kept as long as its
    message (see core.body_placement.keep_days)."""
    key = body_key(message.queue, message.id, ref.version)
    until = body_expiry(message.due_at, retention)
    if ref.placement is Placement.ITEM:
        item = body_to_item(message.queue, message.id, ref.version, message.body, expire_at=until)
        return BodyVersion(message.queue, message.id, ref, key, item=item)
    if ref.placement is Placement.S3:
        keep = keep_days(message.created_at, until)
        return BodyVersion(message.queue, message.id, ref, key, body=message.body, keep_days=keep)
    return BodyVersion(message.queue, message.id, ref, key)


# status counters -----------------------------------------------------------------------------
COUNT_SHARDS = keys.COUNT_SHARDS
CountKey = tuple[str, int, int]  # queue, epoch ms, shard


def count_changes(
    changes: list[tuple[Message, Status | None]], shard: int | None = None
) -> dict[CountKey, dict[Status, int]]:
    """What status changes (a message now, and its status before; None: new) add to which counter item,
    summed per item; a change that leaves the status as it was adds nothing. `@later` is not counted.
    `shard`: every change of a queue life on that counter item (one write for a whole batch); None: each on
    its message id's."""
    deltas: dict[CountKey, dict[Status, int]] = {}
    for message, before in changes:
        if before is message.status or message.queue == keys.LATER_QUEUE:
            continue
        epoch = to_ms(message.queue_epoch) if message.queue_epoch is not None else 0
        item = shard_of(message.id, COUNT_SHARDS) if shard is None else shard
        counts = deltas.setdefault((message.queue, epoch, item), {})
        counts[message.status] = counts.get(message.status, 0) + 1
        if before is not None:
            counts[before] = counts.get(before, 0) - 1
    return {key: {s: d for s, d in counts.items() if d} for key, counts in deltas.items() if any(counts.values())}


def count_update(key: CountKey, deltas: Mapping[Status, int]) -> dict[str, Any]:
    """The UpdateItem adding `deltas` to one counter item (created by its first update)."""
    queue, epoch, shard = key
    names = {f"#s{i}": status.value for i, status in enumerate(deltas)}
    values = {f":d{i}": n(delta) for i, delta in enumerate(deltas.values())}
    return {
        "Key": {"pk": s(queue), "sk": s(keys.count_sk(epoch, shard))},
        "UpdateExpression": "ADD " + ", ".join(f"#s{i} :d{i}" for i in range(len(deltas))) + f" SET {KEEP_FV}",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {**values, **fv_value("count")},
    }


def counts_from_items(items: list[Item]) -> dict[str, int]:
    """A queue life's counts from its counter items, every status named (a message stored before counters
    were kept may take a count below zero as it moves on: shown as 0)."""
    totals = {status.value: 0 for status in Status}
    for item in items:
        checked("count", item)
        for status in totals:
            totals[status] += _int(item, status, 0)
    return {status: max(0, total) for status, total in totals.items()}


# sizes, by DynamoDB's published rules -------------------------------------------------------
def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value: strings and binaries their length, a number about one byte per
    two significant digits plus one, a list or map 3 bytes plus 1 per element and the elements."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode("utf-8"))
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw if isinstance(raw, bytes) else base64.b64decode(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    if kind == "SS":
        return sum(len(v.encode()) for v in raw)
    if kind == "NS":
        return sum(_number_size(v) for v in raw)
    if kind == "BS":
        return sum(len(v) for v in raw)
    raise ValueError(f"unknown DynamoDB type {kind}")


def _number_size(text: str) -> int:
    digits = format(abs(Decimal(text)), "f").replace(".", "").strip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes DynamoDB bills an item by: attribute names (UTF-8) plus values."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


# sweeper bookkeeping ------------------------------------------------------------------------
STATE_KEY: Item = {"pk": {"S": keys.SWEEPER_PK}, "sk": {"S": keys.SWEEPER_STATE_SK}}


def shard_key(shard: int) -> Item:
    return {"pk": s(keys.SWEEPER_PK), "sk": s(keys.shard_sk(shard))}


def bucket_key(bucket: int) -> Item:
    """A due bucket's record (core.due_width)."""
    return {"pk": s(keys.BUCKETS_PK), "sk": s(keys.bucket_sk(bucket))}


def due_entry_from_item(item: Item) -> DueEntry:
    """A due-index row (keys-only projection plus version, flow key and priority)."""
    due_ms, scheduled_ms, message_id = keys.sort_key_parts(item["sweep_sk"]["S"])
    version, key = int(item["version"]["N"]), _str(item, "flow_key")
    priority = _int(item, "priority", DEFAULT_PRIORITY)
    queue = keys.queue_of_pk(item["pk"]["S"])
    return DueEntry(queue, message_id, version, due_ms, key, priority, scheduled_ms=scheduled_ms)


def sweep_state_from_items(items: list[Item], default: SweepState) -> SweepState:
    """The state item and the shard items of fan-out invocations; `default` when there is no state item yet."""
    for item in items:
        checked("sweep", item)
    shards = {
        int(item["sk"]["S"].removeprefix(keys.SHARD_PREFIX)): ShardProgress(
            watermark=int(item["watermark"]["N"]),
            due=_int(item, "due", 0),
            run=_int(item, "run", 0),
            complete=_bool(item, "complete"),
        )
        for item in items
        if item["sk"]["S"].startswith(keys.SHARD_PREFIX)
    }
    state = next((item for item in items if item["sk"] == STATE_KEY["sk"]), None)
    if state is None:
        return replace(default, shards=shards)
    return SweepState(
        int(state["watermark"]["N"]),
        int(state["recovery_watermark"]["N"]),
        shards=shards,
        last_due=_int(state, "last_due", 0),
        last_end=_int(state, "last_end", 0),
        last_run=_int(state, "last_run", 0),
        last_workers=_int(state, "last_workers", 1),
        last_complete=_bool(state, "last_complete"),
    )


def _int(item: Item, key: str, default: int) -> int:
    value = _num(item, key)
    return default if value is None else value


def _bool(item: Item, key: str) -> bool:
    return bool(item.get(key, {}).get("BOOL", True))


# schedules -----------------------------------------------------------------------------------
def schedule_key(queue: str, name: str) -> Item:
    return {"pk": {"S": queue}, "sk": {"S": keys.schedule_sk(name)}}


def schedule_to_item(schedule: Schedule) -> Item:
    rule = schedule.recurrence
    doc = {
        "cron": None if rule.cron is None else rule.cron.text,
        "every": rule.every,
        "timezone": rule.timezone,
        "start_at": to_ms(rule.start_at) if rule.start_at else None,
        "end_at": to_ms(rule.end_at) if rule.end_at else None,
        "catch_up": rule.catch_up.value,
        "jitter": rule.jitter,
    }
    item: Item = {
        **schedule_key(schedule.queue, schedule.name),
        **fv("schedule"),
        "name": s(schedule.name),
        "rule": s(_dumps(doc)),
        "body": s(_dumps(schedule.body)),
        "created_at": n(to_ms(schedule.created_at)),
        "paused": {"BOOL": schedule.paused},
        "version": n(schedule.version),
        # Listed in the due index, so the sweep's chain repair pages through every schedule.
        "sweep_pk": s(keys.SCHEDULES_PK),
        "sweep_sk": s(keys.schedules_sk(schedule.queue, schedule.name)),
    }
    if schedule.target is not None:
        item["target"] = s(target_to_json(schedule.target))
    if schedule.window is not None:
        item["window"] = s(_dumps(to_doc(schedule.window)))
    if schedule.queue_epoch is not None:
        item["queue_epoch"] = n(to_ms(schedule.queue_epoch))
    if schedule.flow_key is not None:
        item["flow_key"] = s(schedule.flow_key)
    if schedule.priority != DEFAULT_PRIORITY:
        item["priority"] = n(schedule.priority)
    if schedule.paused_at is not None:
        item["paused_at"] = n(to_ms(schedule.paused_at))
    if schedule.written_at is not None:
        item["written_at"] = n(to_ms(schedule.written_at))
    return item


def schedule_from_item(item: Item) -> Schedule:
    checked("schedule", item)
    doc = json.loads(item["rule"]["S"])
    target = _str(item, "target")
    recurrence = Recurrence(
        cron=parse_cron(doc["cron"]) if doc["cron"] is not None else None,
        every=doc["every"],
        timezone=doc["timezone"],
        start_at=from_ms(doc["start_at"]) if doc["start_at"] is not None else None,
        end_at=from_ms(doc["end_at"]) if doc["end_at"] is not None else None,
        # A schedule stored before v1.2 had neither: it skips, with no jitter.
        catch_up=CatchUp(doc.get("catch_up", CatchUp.SKIP.value)),
        jitter=doc.get("jitter", 0),
    )
    return Schedule(
        queue=item["pk"]["S"],
        name=item["name"]["S"],
        recurrence=recurrence,
        body=json.loads(item["body"]["S"]),
        created_at=from_ms(int(item["created_at"]["N"])),
        target=target_from_json(target) if target else None,
        paused=bool(item["paused"]["BOOL"]),
        version=int(item["version"]["N"]),
        queue_epoch=_time(item, "queue_epoch"),
        flow_key=_str(item, "flow_key"),
        priority=_int(item, "priority", DEFAULT_PRIORITY),
        window=_window_of(item),
        paused_at=_time(item, "paused_at"),
        written_at=_time(item, "written_at"),
    )
