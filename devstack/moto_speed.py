"""Keeps the in-process moto server fast: its SQS code builds every queue attribute per message.

moto 5.2 reads one attribute (`ContentBasedDeduplication` on send, `MessageRetentionPeriod` on
receive) through `queue.attributes`, a dict whose `ApproximateNumberOf*` entries count every message
in the queue: sends and receives slow down as the timer queue fills (24 msgs/s at 2,000 queued).
The patch returns a mapping that computes only the attributes asked for, the way moto does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from moto.core.utils import camelcase_to_underscores
from moto.sqs import models


def _names(queue: Any) -> list[str]:
    """The attribute names moto's `Queue.attributes` would hold, in its order."""
    names = list(queue.BASE_ATTRIBUTES)
    if queue.fifo_queue:
        names += queue.FIFO_ATTRIBUTES
    if queue.kms_master_key_id:
        names += queue.KMS_ATTRIBUTES
    if queue.policy:
        names.append("Policy")
    if queue.redrive_policy:
        names.append("RedrivePolicy")
    return names


def _value(queue: Any, name: str) -> Any:
    if name == "Policy":
        return queue.policy
    if name == "RedrivePolicy":
        return json.dumps(queue.redrive_policy)
    value = getattr(queue, camelcase_to_underscores(name))
    return str(value).lower() if isinstance(value, bool) else value


class QueueAttributes(Mapping[str, Any]):
    """moto's attribute dict, each value computed when read."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self._names = _names(queue)

    def __getitem__(self, key: str) -> Any:
        if key not in self._names:
            raise KeyError(key)
        return _value(self._queue, key)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _attributes(queue: Any) -> QueueAttributes:
    return QueueAttributes(queue)


def install() -> None:
    """Idempotent: the property is replaced once per process."""
    current: Any = models.Queue.__dict__["attributes"]
    if current.fget is _attributes:
        return
    models.Queue.attributes = property(_attributes)  # type: ignore[method-assign,assignment]
