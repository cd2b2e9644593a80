"""The liveness check of a message table (issue 10): every message ended, or has a way forward.

Final, or pending with due-index keys (a sweep, or the recovery sweep, hands it off) or a lease not yet
over, or delivering under a lease not yet over; a pending or delivering one past its lease lives only while
its timer is in the timer queue (it comes back: a paused queue's timer is sent on every recheck, a delivering
attempt is taken over). Anything else is stuck.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hourglass.adapters.timer_queue import read_timers
from hourglass.core.keys import MESSAGE_PREFIX, queue_of_pk
from hourglass.core.model import Status
from hourglass.core.timestamps import to_ms
from hourglass.errors import ValidationError

FINAL = frozenset({Status.DELIVERED, Status.FAILED, Status.EXPIRED, Status.CANCELLED})
# The verdicts a live message gets, in the order the summary line names them.
VERDICTS = ("final", "indexed", "leased", "in flight", "timer waiting")


@dataclass(frozen=True)
class Liveness:
    counts: Mapping[str, int]
    stuck: tuple[str, ...]  # "<queue>/<id> <status>" of each message with no way forward

    @property
    def ok(self) -> bool:
        return not self.stuck

    def line(self) -> str:
        total = sum(self.counts.values()) + len(self.stuck)
        named = ", ".join(f"{verdict} {self.counts.get(verdict, 0)}" for verdict in VERDICTS)
        shown = f" ({', '.join(self.stuck[:5])}{', ...' if len(self.stuck) > 5 else ''})" if self.stuck else ""
        return f"liveness: {total} messages: {named}; stuck {len(self.stuck)}{shown}"


def verdict(item: Mapping[str, Any], now_ms: int, timers: frozenset[str]) -> str | None:
    """How one message item goes on (a VERDICTS entry); None: it cannot."""
    status = Status(item["status"]["S"])
    lease = int(item["claimed_until"]["N"]) if "claimed_until" in item else None
    if status in FINAL:
        return "final"
    if status is Status.PENDING and "sweep_pk" in item and "sweep_sk" in item:
        return "indexed"
    if lease is not None and lease > now_ms:
        return "leased" if status is Status.PENDING else "in flight"
    if item["sk"]["S"].removeprefix(MESSAGE_PREFIX) in timers:
        return "timer waiting"
    return None


def check(
    client: Any, table: str, now: datetime, *, timers: Iterable[str] = (), queues: Iterable[str] | None = None
) -> Liveness:
    """Reads every message item of `table` (a Scan), or of `queues` only; `timers`: ids whose timer is in
    the timer queue (`timer_ids`)."""
    known = frozenset(timers)
    wanted = None if queues is None else frozenset(queues)
    now_ms = to_ms(now)
    counts: Counter[str] = Counter()
    stuck: list[str] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "begins_with(sk, :m)",
        "ProjectionExpression": "pk, sk, #st, claimed_until, sweep_pk, sweep_sk",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {":m": {"S": MESSAGE_PREFIX}},
    }
    while True:
        page = client.scan(**kwargs)
        for item in page.get("Items", []):
            queue = queue_of_pk(item["pk"]["S"])  # a spread queue's messages are in partitions of their own
            if wanted is not None and queue not in wanted:
                continue
            found = verdict(item, now_ms, known)
            if found is None:
                stuck.append(f"{queue}/{item['sk']['S'].removeprefix(MESSAGE_PREFIX)} {item['status']['S']}")
            else:
                counts[found] += 1
        if "LastEvaluatedKey" not in page:
            return Liveness(dict(counts), tuple(sorted(stuck)))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def timer_ids(client: Any, queue_url: str, *, hide: int = 60) -> frozenset[str]:
    """The message ids of the timers in the timer queue now visible; each is hidden for `hide` seconds
    (so each is read once): for the end of a run, when nothing consumes the queue any more."""
    ids: set[str] = set()
    while True:
        got = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=hide)
        messages = got.get("Messages", [])
        if not messages:
            return frozenset(ids)
        for message in messages:
            try:
                ids.update(timer.id for timer in read_timers(message["Body"]))
            except ValidationError:
                continue  # poison: names no message
