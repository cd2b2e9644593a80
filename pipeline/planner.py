"""One input row to one planned message (or a reject reason), with the REST API's own validation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

from hourglass import contract
from hourglass.adapters import http_target
from hourglass.adapters.items import message_to_item
from hourglass.core import ids, keys, message_partitions, schedule, validation
from hourglass.core.admission import admit
from hourglass.core.model import Queue, Status
from hourglass.core.timestamps import to_ms
from hourglass.errors import ValidationError
from hourglass.service.targets import check_target
from hourglass.settings import Settings

# validation.new_message names fields after their place in a REST batch; a row has no batch.
_BATCH_PREFIX = "messages[0]."
# A stack that allows no SQS or AWS service target and no callback to a private address.
STRICT = Settings(table="", timer_queue_url="")
# (queue, id, dedup_id, status, due_ms, sweep_pk, sweep_sk, item, error)
Plan = tuple[str | None, str | None, str | None, str | None, int | None, str | None, str | None, str | None, str | None]


@dataclass(frozen=True)
class KeySettings:
    """The stack's due-index layout; rows keyed differently would never be swept."""

    shards: int = contract.DEFAULT_SHARDS
    bucket_seconds: int = contract.DEFAULT_BUCKET_SECONDS


@dataclass
class Planner:
    queues: Mapping[str, Queue]
    now: datetime
    source: str
    keys: KeySettings = KeySettings()
    # The stack's settings a target is checked against, as the API checks it (allow-lists, private
    # callbacks, its own resources).
    stack: Settings = STRICT
    # The queues this load spreads (`core/message_partitions.py`): their messages get spread ids. From the input
    # alone, so that a load run again plans the same ids.
    spread: frozenset[str] = frozenset()
    _checked_hosts: dict[tuple[str, int], str | None] = field(default_factory=dict)

    def plan(self, row: int, text: str | None, key: str | None = None) -> Plan:
        """`key` names the row in its id (default `<source>:<row>`); a dedup_id takes its place."""
        named = None
        try:
            doc = _document(text)
            raw = doc.pop("queue", None)
            named = raw if isinstance(raw, str) else None
            return self._message(key or f"{self.source}:{row}", validation.queue_name(raw), doc)
        except ValidationError as exc:
            return _rejected(_reason(exc), named)

    def _message(self, key: str, name: str, doc: dict[str, object]) -> Plan:
        queue = self.queues.get(name)
        if queue is None:
            raise ValidationError("queue", f"queue {name} does not exist")
        request = validation.new_message(doc, 0, queue.settings, self.now)
        check_target(self.stack, request.target, "target", self._check_url)
        message_id = ids.deterministic_id(name, request.dedup_id or f"row:{key}")
        if name in self.spread:
            message_id = keys.spread_id(message_id, message_partitions.PARTITIONS)
        message = admit(queue, request, self.now, message_id)
        sweep = (
            schedule.sweep_keys(
                message.id,
                message.due_at,
                shards=self.keys.shards,
                bucket_seconds=self.keys.bucket_seconds,
                scheduled_ms=to_ms(message.scheduled),
            )
            if message.status is Status.PENDING
            else None
        )
        item = json.dumps(message_to_item(message), separators=(",", ":"), ensure_ascii=False)
        return (
            name,
            message.id,
            message.dedup_id,
            message.status.value,
            to_ms(message.due_at),
            sweep.pk if sweep else None,
            sweep.sk if sweep else None,
            item,
            None,
        )

    def _check_url(self, url: str) -> None:
        """The API's private-address check, resolving each host once per worker."""
        parts = urlsplit(url)
        key = (parts.hostname or "", parts.port or 0)
        if key not in self._checked_hosts:
            try:
                http_target.check_url(url, allow_private=False)
                self._checked_hosts[key] = None
            except ValidationError as exc:
                self._checked_hosts[key] = exc.detail
        problem = self._checked_hosts[key]
        if problem is not None:
            raise ValidationError("url", problem)


def _document(text: str | None) -> dict[str, object]:
    try:
        doc = validation.decode_json(text)
    except ValidationError as exc:
        raise ValidationError("row", exc.detail.removeprefix("request body ")) from exc
    if not isinstance(doc, dict):
        raise ValidationError("row", "must be a JSON object")
    return doc


def _rejected(reason: str, queue: str | None = None) -> Plan:
    return (queue, None, None, None, None, None, None, None, reason)


def _reason(exc: ValidationError) -> str:
    return f"{exc.field.removeprefix(_BATCH_PREFIX)}: {exc.detail}"
