"""The SQS timer queue: sends timer messages (with DelaySeconds) and parses them back.

Timers due within `PACK_SPAN_MS` of each other share one SQS message (a pack), so a busy second
costs one send, one receive, one delete and one dispatcher invocation instead of one per message.
Each message names its format (`fv`); one newer than this release reads is sent back (docs/upgrades.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.core import formats
from hourglass.core.handoff import Scheduled, Timer
from hourglass.core.model import DEFAULT_PRIORITY
from hourglass.errors import TimerQueueError, ValidationError

SQS_BATCH = 10
# A pack is visible TIMER_HEAD_START before its first timer is due and the dispatcher sleeps until
# each one is: with a span under a second no timer waits longer than schedule.MAX_SLEEP. A full
# batch (10 packs) is at most 100 deliveries, possibly all due at once: about three rounds of a
# dispatcher invocation's 32 threads (docs/capacity.md).
PACK_SPAN_MS = 1000
MAX_PACK = 10
# The timer format this release writes, and the newest it reads (docs/upgrades.md, "Timers"): a message
# without `fv` is format 1 (release 1.2.0, which ignores `fv`); format 2 (1.3.0) is format 1 with `fv`.
TIMER_FORMAT = formats.FORMATS["timer"]
# A message of a newer format goes back to the queue, as a new message, visible again after this long:
# a newer dispatcher takes it then; meanwhile this release's dispatchers keep sending it back.
SEND_BACK_SECONDS = 10


def pack_to_json(timers: Sequence[Timer]) -> str:
    """The first timer in the old single-timer fields (so one-timer bodies are unchanged), the rest in `more`."""
    first = timers[0]
    doc: dict[str, Any] = {"fv": TIMER_FORMAT, "q": first.queue, "id": first.id, "v": first.version}
    doc["due"] = first.due_ms
    doc["sent"] = first.sent_ms
    doc.update(first.extra())
    if len(timers) > 1:
        doc["more"] = [_entry(t) for t in timers[1:]]
    return json.dumps(doc, separators=(",", ":"))


def _entry(timer: Timer) -> list[object]:
    """A packed timer: [q, id, v, due], plus [latest, waits] for a paced or refused one, plus [1] for a chained
    one, plus [chained, key, priority] for one with a flow key or priority (v1.2), plus [0] for one whose slot
    counts in no queue scope (`Timer.queue_scoped`)."""
    entry: list[object] = [timer.queue, timer.id, timer.version, timer.due_ms]
    if not timer.queue_scoped:
        return [*entry, timer.latest_ms, timer.waits, int(timer.chained), timer.key, timer.priority, 0]
    if timer.key is not None or timer.priority != DEFAULT_PRIORITY:
        return [*entry, timer.latest_ms, timer.waits, int(timer.chained), timer.key, timer.priority]
    if timer.chained:
        return [*entry, timer.latest_ms, timer.waits, 1]
    return entry if timer.latest_ms is None and not timer.waits else [*entry, timer.latest_ms, timer.waits]


def _packed(first: Timer, entry: list[Any]) -> Timer:
    if len(entry) not in (4, 6, 7, 9, 10):
        raise ValueError("a packed timer has 4, 6, 7, 9 or 10 fields")
    padded = [*entry, None, 0] if len(entry) == 4 else entry
    queue, message_id, version, due, latest, waits, *rest = padded
    chained = bool(rest and rest[0])
    key, priority = (rest[1], rest[2]) if len(rest) >= 3 else (None, DEFAULT_PRIORITY)
    return Timer(
        str(queue),
        str(message_id),
        int(version),
        int(due),
        first.sent_ms,
        latest_ms=None if latest is None else int(latest),
        waits=int(waits or 0),
        key=None if key is None else str(key),
        priority=int(priority),
        chained=chained,
        queue_scoped=len(rest) < 4 or bool(rest[3]),
    )


def timer_format(text: str) -> int:
    """The format a timer message is written in (1 without `fv`); a malformed one is a ValidationError."""
    try:
        fv = json.loads(text).get("fv", 1)
    except (ValueError, AttributeError) as exc:
        raise ValidationError("timer", f"malformed timer message: {exc}") from exc
    if type(fv) is not int or fv < 1:
        raise ValidationError("timer", f"malformed timer format: {fv!r}")
    return fv


def read_timers(text: str) -> list[Timer]:
    """Every timer of a timer message, single or packed; NewerFormatError for a format newer than TIMER_FORMAT."""
    formats.check("timer", timer_format(text))
    first = Timer.from_json(text)
    try:
        more = json.loads(text).get("more") or []
        return [first] + [_packed(first, entry) for entry in more]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValidationError("timer", f"malformed timer pack: {exc}") from exc


def packs(items: Sequence[Scheduled]) -> list[list[Scheduled]]:
    """Groups by due time: a pack holds timers due within PACK_SPAN_MS of its first, at most MAX_PACK."""
    grouped: list[list[Scheduled]] = []
    for item in sorted(items, key=lambda i: i.timer.due_ms):
        last = grouped[-1] if grouped else None
        if last and len(last) < MAX_PACK and item.timer.due_ms - last[0].timer.due_ms < PACK_SPAN_MS:
            last.append(item)
        else:
            grouped.append([item])
    return grouped


class TimerQueue:
    def __init__(self, queue_url: str, client: Any = None) -> None:
        self.queue_url = queue_url
        self.client = client or aws.client("sqs")
        self.requests = 0

    def send(self, items: Sequence[Scheduled]) -> list[Scheduled]:
        """Send packed, in batches of 10 packs; returns the items SQS did not accept."""
        grouped = packs(items)
        failed: list[Scheduled] = []
        for start in range(0, len(grouped), SQS_BATCH):
            chunk = grouped[start : start + SQS_BATCH]
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": pack_to_json([item.timer for item in pack]),
                    "DelaySeconds": min(item.delay_seconds for item in pack),
                }
                for i, pack in enumerate(chunk)
            ]
            try:
                self.requests += 1
                answer = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError):
                failed.extend(item for pack in chunk for item in pack)
                continue
            failed.extend(item for entry in answer.get("Failed", []) for item in chunk[int(entry["Id"])])
        return failed

    def send_all(self, items: Sequence[Scheduled]) -> None:
        """Send everything or raise: for callers that must not acknowledge a partial hand-off."""
        failed = self.send(items)
        if failed:
            failed = self.send(failed)
        if failed:
            raise TimerQueueError(f"{len(failed)} timer messages were not accepted by SQS")

    def send_back(self, bodies: Sequence[str], delay_seconds: int = SEND_BACK_SECONDS) -> set[int]:
        """Sends timer message bodies again, as they are, visible after `delay_seconds`: a new message starts
        with no receives, so a body this release cannot read never nears the DLQ. Returns the indexes SQS
        did not accept."""
        failed: set[int] = set()
        for start in range(0, len(bodies), SQS_BATCH):
            entries = [
                {"Id": str(start + i), "MessageBody": body, "DelaySeconds": delay_seconds}
                for i, body in enumerate(bodies[start : start + SQS_BATCH])
            ]
            try:
                self.requests += 1
                answer = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError):
                failed.update(range(start, start + len(entries)))
                continue
            failed.update(int(entry["Id"]) for entry in answer.get("Failed", []))
        return failed

    def hide(self, receipts: Mapping[str, int]) -> None:
        """Hides each received timer message (receipt handle -> seconds from now) for that long.

        A handle that no longer holds its message (deleted, or received again after it showed) is
        refused by SQS on its own: the rest of its batch still counts."""
        items = list(receipts.items())
        for start in range(0, len(items), SQS_BATCH):
            entries = [
                {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
                for i, (handle, seconds) in enumerate(items[start : start + SQS_BATCH])
            ]
            try:
                self.requests += 1
                self.client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                raise TimerQueueError(f"timer visibility not changed: {exc}") from exc
