"""The hand-off rule: whether a message goes to the timer queue now, with which lease, index keys and timer.

Ingest, PATCH, the sweep, retries and the bulk writer all place a message through `place`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from hourglass.core import schedule
from hourglass.core.due_width import Widths
from hourglass.core.model import DEFAULT_PRIORITY, Message, Status
from hourglass.core.pacing import Slot, Start
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import ValidationError

# Extra head start of a paced timer over schedule.TIMER_HEAD_START (the total stays under MAX_SLEEP).
PACED_HEAD_START = timedelta(seconds=1)
# A paced timer whose slot is far comes back at least this often (below the default sweep look-ahead),
# so that a slot its queue no longer needs (its rate limit removed) holds the message back no longer.
PACED_MAX_DELAY = 240


@dataclass(frozen=True)
class Timing:
    """The deployment's due-index layout and hand-off window."""

    shards: int
    bucket_seconds: int
    lookahead: float
    safety: float
    # This process's bucket widths, where it places index entries (None: every bucket at `shards`).
    widths: Widths | None = field(default=None, compare=False)

    @property
    def sweep_ahead(self) -> float:
        """The lookahead in effect: clamped so that lookahead + safety fits in one SQS delay.

        Ingest hands off what is due within sweep_ahead + safety and the sweep covers up to
        now + sweep_ahead, so a write in flight during a sweep (shorter than `safety`) is either
        handed off or due after the sweep's end, whatever HOURGLASS_LOOKAHEAD says.
        """
        return max(0.0, min(self.lookahead, schedule.MAX_TIMER_DELAY - self.safety))


@dataclass(frozen=True)
class DueEntry:
    """A message version waiting for its due time (a due-index row)."""

    queue: str
    id: str
    version: int
    due_ms: int
    # Flow control (v1.2): the message's key and priority, for its key's limits and its place in line.
    key: str | None = None
    priority: int = DEFAULT_PRIORITY
    # When it was scheduled for, if not its due time (deferred to a window's opening, or retried).
    scheduled_ms: int | None = None

    @classmethod
    def of(cls, message: Message) -> DueEntry:
        due_ms = to_ms(message.due_at)
        return cls(
            message.queue,
            message.id,
            message.version,
            due_ms,
            message.flow_key,
            message.priority,
            scheduled_ms=to_ms(message.scheduled),
        )

    @property
    def order(self) -> tuple[int, int, str]:
        """Release order: due time, then the time it was scheduled for (a crowd deferred to one opening
        goes in the order it was scheduled), then id."""
        return self.due_ms, self.due_ms if self.scheduled_ms is None else self.scheduled_ms, self.id

    def start(self) -> Start:
        return Start(self.due_ms, self.key, self.priority, (self.id, self.version))


@dataclass(frozen=True)
class Timer:
    """A reference to a message version that becomes due at `due_ms`.

    A rate-limited queue's timer carries its pacing slot: `due_ms` is the slot's start and
    `latest_ms` the last instant the attempt may start; `waits` counts concurrency refusals so far;
    `key` and `priority` are its message's flow key and priority (v1.2).
    `chained`: a schedule occurrence whose next occurrence was stored at its hand-off (the sweep's claim).
    `queue_scoped`: its slot counts in the queue's own scope (`Slot.queue_scoped`).
    """

    queue: str
    id: str
    version: int
    due_ms: int
    sent_ms: int
    latest_ms: int | None = None
    waits: int = 0
    key: str | None = None
    priority: int = DEFAULT_PRIORITY
    chained: bool = False
    queue_scoped: bool = True

    @property
    def slot(self) -> Slot | None:
        return None if self.latest_ms is None else Slot(self.due_ms, self.latest_ms, self.queue_scoped)

    def in_slot(self, slot: Slot) -> Timer:
        """The timer targeting a new pacing slot."""
        return replace(self, due_ms=slot.start_ms, latest_ms=slot.latest_ms, queue_scoped=slot.queue_scoped)

    @property
    def scope(self) -> str:
        """The flow key whose limits the attempt keeps (messages without one share "")."""
        return self.key or ""

    def start(self, due_ms: int) -> Start:
        return Start(due_ms, self.key, self.priority, (self.id, self.version))

    def extra(self) -> dict[str, int | str]:
        """The optional fields, only when set: a timer without them is exactly as before."""
        doc: dict[str, int | str] = {} if self.latest_ms is None else {"l": self.latest_ms}
        doc |= {"w": self.waits} if self.waits else {}
        doc |= {"c": 1} if self.chained else {}
        doc |= {"k": self.key} if self.key is not None else {}
        doc |= {} if self.queue_scoped else {"nq": 1}
        return doc | ({"p": self.priority} if self.priority != DEFAULT_PRIORITY else {})

    def to_json(self) -> str:
        doc = {"q": self.queue, "id": self.id, "v": self.version, "due": self.due_ms, "sent": self.sent_ms}
        return json.dumps(doc | self.extra(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Timer:
        try:
            doc = json.loads(text)
            timer = cls(
                queue=str(doc["q"]),
                id=str(doc["id"]),
                version=int(doc["v"]),
                due_ms=int(doc["due"]),
                sent_ms=int(doc["sent"]),
                latest_ms=None if doc.get("l") is None else int(doc["l"]),
                waits=int(doc.get("w") or 0),
                key=None if doc.get("k") is None else str(doc["k"]),
                priority=int(doc.get("p", DEFAULT_PRIORITY)),
                chained=bool(doc.get("c")),
                queue_scoped=not doc.get("nq"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError("timer", f"malformed timer message: {exc}") from exc
        return timer


@dataclass(frozen=True)
class Scheduled:
    timer: Timer
    delay_seconds: int


@dataclass(frozen=True)
class Claim:
    """A stored message version leased for hand-off until `lease` (and its pacing slot, if paced)."""

    entry: DueEntry
    lease: datetime
    slot: Slot | None = None
    chained: bool = False  # an occurrence whose next one the claimer stored (Timer.chained)
    # False: handed off without a claim write (`delivery_control.claims_hand_offs`), so nothing to give back.
    written: bool = True


@dataclass(frozen=True)
class Placement:
    """Where a message waits: its due-index keys, the timer to send now, the lease stored with it.

    `written_first`: the item is stored (with its keys and lease) before the timer is sent; else
    the timer goes first and the item is written without keys unless SQS refused the timer.
    """

    keys: SweepKeys | None
    timer: Scheduled | None = None
    lease: datetime | None = None
    written_first: bool = True

    def index_keys(self, *, sent: bool) -> SweepKeys | None:
        """The keys the item is written with: none for a timer-first hand-off whose timer SQS took."""
        return None if sent and self.timer is not None and not self.written_first else self.keys

    def claim(self) -> Claim | None:
        """The lease to give back if the timer of an item written first is refused."""
        if self.timer is None or self.lease is None:
            return None
        timer = self.timer.timer
        entry = DueEntry(timer.queue, timer.id, timer.version, timer.due_ms, timer.key, timer.priority)
        return Claim(entry, self.lease, timer.slot)


def hands_off(due: datetime, now: datetime, timing: Timing) -> bool:
    return schedule.hands_off_now(due, now, timing.sweep_ahead, timing.safety)


def overtaken(due: datetime, started: datetime, written: datetime, timing: Timing) -> bool:
    """Whether a message placed at `started` and stored with due-index keys, its write confirmed at
    `written`, may have been passed by a sweep. A write shorter than the safety margin never is (a
    sweep that could reach its due time starts after it landed); a slower one (retries, a throttled
    table) is when its due time is inside the hand-off window of the moment it landed."""
    return written - started > timedelta(seconds=timing.safety) and hands_off(due, written, timing)


def moved_keys(entry: DueEntry, slot: Slot | None, timing: Timing) -> SweepKeys | None:
    """A claim's new index keys: a pacing slot in a later bucket than the due time moves the entry
    there, so the recovery sweep (whose watermark cannot pass a leased entry) reaches it only after
    the slot."""
    width = timing.bucket_seconds
    if slot is None or schedule.bucket_of(from_ms(slot.start_ms), width) == schedule.bucket_of(
        from_ms(entry.due_ms), width
    ):
        return None
    return keys_of(entry.id, from_ms(slot.start_ms), timing)


def keys_of(message_id: str, due: datetime, timing: Timing, scheduled_ms: int | None = None) -> SweepKeys:
    return schedule.sweep_keys(
        message_id,
        due,
        shards=timing.shards,
        bucket_seconds=timing.bucket_seconds,
        scheduled_ms=scheduled_ms,
        width=None if timing.widths is None else timing.widths.width,
    )


def timer_for(entry: DueEntry, now: datetime, slot: Slot | None = None, *, chained: bool = False) -> Scheduled:
    """The timer of a hand-off; with a pacing slot it targets the slot, not the due time (never earlier)."""
    timer = Timer(
        entry.queue, entry.id, entry.version, entry.due_ms, to_ms(now), None, 0, entry.key, entry.priority, chained
    )
    timer = timer if slot is None else timer.in_slot(slot)
    return Scheduled(timer, delay_of(timer, now))


def delay_of(timer: Timer, now: datetime) -> int:
    """SQS DelaySeconds of a timer. A paced one is made visible a second sooner: it must start within its
    slot's tolerance, so a slow receive costs it the slot, while the dispatcher sleeps the extra second."""
    if timer.latest_ms is None:
        return schedule.timer_delay(from_ms(timer.due_ms), now)
    return min(PACED_MAX_DELAY, schedule.timer_delay(from_ms(timer.due_ms) - PACED_HEAD_START, now))


def resend(timer: Timer, now: datetime) -> Scheduled:
    """A timer that came back too early, sent again for what is left of its wait (slot and waits kept)."""
    return Scheduled(replace(timer, sent_ms=to_ms(now)), delay_of(timer, now))


def paced(placement: Placement, slot: Slot, now: datetime, timing: Timing) -> Placement:
    """A placement whose timer targets its pacing slot. An item written first is leased from the slot
    and indexed at it, so the recovery sweep (whose watermark cannot pass a leased entry) neither
    hands it off again nor waits for it before the slot has passed."""
    if placement.timer is None:
        return placement
    timer = placement.timer.timer
    entry = DueEntry(timer.queue, timer.id, timer.version, timer.due_ms, timer.key, timer.priority)
    scheduled = timer_for(entry, now, slot)
    if placement.lease is None:
        return replace(placement, timer=scheduled)
    start = from_ms(slot.start_ms)
    return replace(
        placement, timer=scheduled, lease=schedule.claim_lease(start, now), keys=keys_of(timer.id, start, timing)
    )


def place_entry(entry: DueEntry, pending: bool, now: datetime, timing: Timing, *, written_first: bool) -> Placement:
    """Due within lookahead + safety: a timer now (and a lease if the item is written first); else index keys."""
    if not pending:
        return Placement(keys=None)
    due = from_ms(entry.due_ms)
    keys = keys_of(entry.id, due, timing, entry.scheduled_ms)
    if not hands_off(due, now, timing):
        return Placement(keys=keys)
    lease = schedule.claim_lease(due, now) if written_first else None
    return Placement(keys=keys, timer=timer_for(entry, now), lease=lease, written_first=written_first)


def place(message: Message, now: datetime, timing: Timing, *, written_first: bool) -> Placement:
    pending = message.status is Status.PENDING
    return place_entry(DueEntry.of(message), pending, now, timing, written_first=written_first)
