"""DynamoDB item layout of queues, messages, dedup records and sweeper state (DynamoDB JSON, no boto3).

Shared by the store adapter, the bulk-scheduling job and the report job's export reader.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from hourglass.core.handoff import DueEntry
from hourglass.core.model import (
    HttpTarget,
    LaterTarget,
    Message,
    Queue,
    QueueSettings,
    RetryPolicy,
    SqsTarget,
    Status,
    Target,
)
from hourglass.core.schedule import SweepKeys
from hourglass.core.sweep_state import ShardProgress, SweepState
from hourglass.core.timestamps import from_ms, to_ms

Item = dict[str, dict[str, Any]]
QUEUE_SK = "#queue"
MESSAGE_PREFIX = "m#"
DEDUP_PREFIX = "d#"


def message_key(queue: str, message_id: str) -> Item:
    return {"pk": {"S": queue}, "sk": {"S": MESSAGE_PREFIX + message_id}}


def queue_key(name: str) -> Item:
    return {"pk": {"S": name}, "sk": {"S": QUEUE_SK}}


def dedup_key(queue: str, dedup_id: str) -> Item:
    return {"pk": {"S": queue}, "sk": {"S": DEDUP_PREFIX + dedup_id}}


def dedup_to_item(queue: str, dedup_id: str, message_id: str, until: datetime) -> Item:
    """The record that makes `dedup_id` point at `message_id` until `until`; TTL removes it later."""
    return {
        **dedup_key(queue, dedup_id),
        "message_id": s(message_id),
        "dedup_until": n(to_ms(until)),
        "expire_at": n(int(until.timestamp()) + 3600),
    }


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": str(value)}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def target_to_json(target: Target) -> str:
    return _dumps(asdict(target))


def target_from_json(text: str) -> Target:
    doc = json.loads(text)
    kind = doc.pop("type")
    if kind == "http":
        return HttpTarget(**doc)
    if kind == "sqs":
        return SqsTarget(**doc)
    return LaterTarget(**doc)


def message_to_item(message: Message, sweep: SweepKeys | None = None) -> Item:
    item: Item = {
        **message_key(message.queue, message.id),
        "id": s(message.id),
        "queue": s(message.queue),
        "status": s(message.status.value),
        "body": s(_dumps(message.body)),
        "created_at": n(to_ms(message.created_at)),
        "due_at": n(to_ms(message.due_at)),
        "version": n(message.version),
        "attempts": n(message.attempts),
    }
    optional: dict[str, dict[str, str] | None] = {
        "expires_at": n(to_ms(message.expires_at)) if message.expires_at else None,
        "delivered_at": n(to_ms(message.delivered_at)) if message.delivered_at else None,
        "last_error": s(message.last_error) if message.last_error else None,
        "dedup_id": s(message.dedup_id) if message.dedup_id else None,
        "target": s(target_to_json(message.target)) if message.target else None,
        "queue_epoch": n(to_ms(message.queue_epoch)) if message.queue_epoch else None,
        "claimed_until": n(to_ms(message.claimed_until)) if message.claimed_until else None,
        "topic": s(message.topic) if message.topic else None,
        "retry": s(_dumps(asdict(message.retry))) if message.retry else None,
        "sweep_pk": s(sweep.pk) if sweep else None,
        "sweep_sk": s(sweep.sk) if sweep else None,
    }
    item.update({key: value for key, value in optional.items() if value is not None})
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
    target = _str(item, "target")
    retry = _str(item, "retry")
    return Message(
        id=item["id"]["S"],
        queue=item["queue"]["S"],
        body=json.loads(item["body"]["S"]),
        status=Status(item["status"]["S"]),
        created_at=from_ms(int(item["created_at"]["N"])),
        due_at=from_ms(int(item["due_at"]["N"])),
        version=int(item["version"]["N"]),
        expires_at=_time(item, "expires_at"),
        attempts=_int(item, "attempts", 0),
        delivered_at=_time(item, "delivered_at"),
        last_error=_str(item, "last_error"),
        dedup_id=_str(item, "dedup_id"),
        target=target_from_json(target) if target else None,
        queue_epoch=_time(item, "queue_epoch"),
        claimed_until=_time(item, "claimed_until"),
        topic=_str(item, "topic"),
        retry=RetryPolicy(**json.loads(retry)) if retry else None,
    )


def queue_to_item(queue: Queue) -> Item:
    settings = queue.settings
    doc = asdict(settings)
    doc["target"] = asdict(settings.target) if settings.target else None
    return {
        **queue_key(queue.name),
        "settings": s(_dumps(doc)),
        "created_at": n(to_ms(queue.created_at)),
    }


def queue_from_item(item: Item) -> Queue:
    doc = json.loads(item["settings"]["S"])
    raw_target = doc.pop("target")
    settings = QueueSettings(
        **{**doc, "retry": RetryPolicy(**doc["retry"])},
        target=target_from_json(_dumps(raw_target)) if raw_target else None,
    )
    return Queue(name=item["pk"]["S"], settings=settings, created_at=from_ms(int(item["created_at"]["N"])))


# sweeper bookkeeping ------------------------------------------------------------------------
SWEEPER_PK = "@sweeper"
STATE_KEY: Item = {"pk": {"S": SWEEPER_PK}, "sk": {"S": "#state"}}
SHARD_PREFIX = "#shard#"


def shard_key(shard: int) -> Item:
    return {"pk": s(SWEEPER_PK), "sk": s(f"{SHARD_PREFIX}{shard}")}


def due_entry_from_item(item: Item) -> DueEntry:
    """A due-index row (keys-only projection plus version)."""
    due_ms, _, message_id = item["sweep_sk"]["S"].partition("#")
    return DueEntry(queue=item["pk"]["S"], id=message_id, version=int(item["version"]["N"]), due_ms=int(due_ms))


def sweep_state_from_items(items: list[Item], default: SweepState) -> SweepState:
    """The state item and the shard items of fan-out workers; `default` when there is no state item yet."""
    shards = {
        int(item["sk"]["S"].removeprefix(SHARD_PREFIX)): ShardProgress(
            watermark=int(item["watermark"]["N"]),
            due=_int(item, "due", 0),
            run=_int(item, "run", 0),
            complete=_bool(item, "complete"),
        )
        for item in items
        if item["sk"]["S"].startswith(SHARD_PREFIX)
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
