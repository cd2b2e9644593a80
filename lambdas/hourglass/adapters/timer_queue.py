"""The SQS timer queue: sends timer messages (with DelaySeconds) and parses them back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hourglass.adapters import aws
from hourglass.errors import TimerQueueError, ValidationError

SQS_BATCH = 10


@dataclass(frozen=True)
class Timer:
    """A reference to a message version that becomes due at `due_ms`."""

    queue: str
    id: str
    version: int
    due_ms: int
    sent_ms: int

    def to_json(self) -> str:
        return json.dumps(
            {"q": self.queue, "id": self.id, "v": self.version, "due": self.due_ms, "sent": self.sent_ms},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Timer:
        try:
            doc = json.loads(text)
            timer = cls(
                queue=str(doc["q"]), id=str(doc["id"]), version=int(doc["v"]),
                due_ms=int(doc["due"]), sent_ms=int(doc["sent"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError("timer", f"malformed timer message: {exc}") from exc
        return timer


@dataclass(frozen=True)
class Scheduled:
    timer: Timer
    delay_seconds: int


class TimerQueue:
    def __init__(self, queue_url: str, client: Any = None) -> None:
        self.queue_url = queue_url
        self.client = client or aws.client("sqs")
        self.requests = 0

    def send(self, items: Sequence[Scheduled]) -> list[Scheduled]:
        """Send in batches of 10; returns the items SQS did not accept."""
        failed: list[Scheduled] = []
        for start in range(0, len(items), SQS_BATCH):
            chunk = items[start : start + SQS_BATCH]
            entries = [
                {"Id": str(i), "MessageBody": item.timer.to_json(), "DelaySeconds": item.delay_seconds}
                for i, item in enumerate(chunk)
            ]
            try:
                self.requests += 1
                answer = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except ClientError:
                failed.extend(chunk)
                continue
            failed.extend(chunk[int(entry["Id"])] for entry in answer.get("Failed", []))
        return failed

    def send_all(self, items: Sequence[Scheduled]) -> None:
        """Send everything or raise: for callers that must not acknowledge a partial hand-off."""
        failed = self.send(items)
        if failed:
            failed = self.send(failed)
        if failed:
            raise TimerQueueError(f"{len(failed)} timer messages were not accepted by SQS")
