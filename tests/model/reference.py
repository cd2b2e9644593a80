"""The whole-system model's reference: what a user of Hourglass was promised, kept per queue lifetime.

The machine (test_system_model.py) tells it what the user did and what reached the outside world; the checks
here compare that with the stored state. Each violation names the rule of issue 23 it breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hourglass.core import failure_notice
from hourglass.core.handoff import Timer
from hourglass.core.model import Message, NoticeStatus, Status
from hourglass.core.ordering import KeyState
from hourglass.core.pacing import HANDOFF_LEAD_MS, pace
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.core.window import Window
from hourglass_client import verify

FINAL = frozenset({Status.DELIVERED, Status.FAILED, Status.EXPIRED, Status.CANCELLED})
# How late a message of an unlimited, running queue may be handed to its target (sweep interval, lookahead
# hand-off, a crashed attempt's lease and the timer's visibility timeout) before it counts as stuck.
SLACK = timedelta(seconds=600)
# How late a first attempt may start on a running queue when nothing crashed: a sweep interval and a hand-off.
ON_TIME = timedelta(seconds=90)
# The fields two messages that went through the same story must agree on (ids and instants differ).
COMPARED = ("status", "attempts", "last_error", "body", "flow_key", "priority")
# The windows (seconds) over which a steady rate limit's starts are counted: at most r*W + max(1, r) in each.
BOUND_WINDOWS = (1, 2, 5, 10)
# A paced start below its limit is at most its slot tolerance after its floor, and this: a slot's start is rounded
# up to whole milliseconds, and so is its floor.
ROUNDING = timedelta(milliseconds=2)

# The pacing slots a store holds for one queue (µs since the epoch), by scope: None for the queue's own, else the
# flow key's ("" for messages without one). See World.calendar.
Calendar = dict[str | None, list[int]]


# How long before a start a message of its key must have been due for the start to have to wait for it: two
# messages due within it may reach their dispatchers in either order (`core.ordering`, the begin's lead).
ORDER_SKEW = timedelta(seconds=1)


@dataclass
class Generation:
    """One lifetime of a queue name: from the PUT that created it to its DELETE."""

    name: str
    epoch: datetime
    target: str = "http"  # "http", "sqs" or "sns" (a topic feeding the SQS target queue)
    rate: float | None = None
    slowest_rate: float | None = None  # the lowest rate this lifetime ever had (None: never limited)
    destination: str | None = None  # "http", "sqs", "sns" or None
    destination_since: datetime | None = None
    max_attempts: int = 3
    paused: bool = False
    paused_ever: bool = False
    alive: bool = True
    target_failed_ever: bool = False  # its target answered anything but 2xx at some point
    schedules: dict[str, bool] = field(default_factory=dict)  # name -> paused
    admitted: int = 0  # messages, occurrences and redeliveries this lifetime admitted (pacing backlog)
    secrets: tuple[str, ...] = ()  # signing_secret, then signing_secret_next, as the last PUT naming them set them
    window: Window | None = None  # its delivery window, as last PUT
    breaker_ever: bool = False  # some PUT of this lifetime gave it a circuit breaker (it may pause itself)
    # It paused itself with a failure destination set (kept since): a `queue.paused` notice is owed, after the
    # `queue_notices_before` of its name that arrived before this lifetime.
    paused_notice_owed: bool = False
    queue_notices_before: int = 0
    window_changed: bool = False  # a PUT changed its window after creation (deferrals of two windows mix)
    catch_up_all: set[str] = field(default_factory=set)  # schedules some PUT gave `catch_up: all`
    # Every PUT of this lifetime gave it `ordering` (v1.3): starts per key are checked (`check_order`).
    ordered_always: bool = False
    ordered_ever: bool = False

    def allowed_lateness(self, slack: timedelta = SLACK) -> timedelta:
        if self.slowest_rate is None:
            return slack
        return slack + timedelta(seconds=self.admitted / self.slowest_rate)


@dataclass
class Paced:
    """The rate limits one lifetime of a queue was created with, whether every later PUT kept them, and the
    attempts it started. The bounds (docs/delivery-control.md) are checked only for a limit kept all its life: a
    change moves the slots to other pacing items, and which rate bounds a window across it is not the model's to
    say. A PUT that died half-way leaves its lifetime's limits unknown."""

    rate: float | None
    flow: dict[str, Any] | None
    steady_rate: bool = True
    steady_flow: bool = True
    starts: list[tuple[datetime, str]] = field(default_factory=list)  # (when, flow key or "")


@dataclass
class Reference:
    generations: list[Generation] = field(default_factory=list)
    notices: dict[str, set[str]] = field(default_factory=dict)  # message id -> events received
    queue_notices: list[str] = field(default_factory=list)  # queues whose `queue.paused` notice arrived
    queue_notice_tries: dict[str, list[str]] = field(default_factory=dict)  # queue -> answers to `queue.paused`
    violations: list[str] = field(default_factory=list)
    flow: dict[str, tuple[str | None, int]] = field(default_factory=dict)  # message id -> (flow key, priority) posted
    paced: dict[tuple[str, datetime], Paced] = field(default_factory=dict)  # (queue, epoch) -> its limits, starts

    def live(self, name: str) -> Generation | None:
        for generation in reversed(self.generations):
            if generation.name == name:
                return generation if generation.alive else None
        return None

    def of(self, name: str, epoch: datetime | None) -> Generation | None:
        """The lifetime a stored message belongs to."""
        return next((g for g in self.generations if g.name == name and g.epoch == epoch), None)

    def violate(self, rule: str, text: str) -> None:
        entry = f"[{rule}] {text}"
        if entry not in self.violations:
            self.violations.append(entry)

    def check_responses(self, messages: Iterable[Message], answered: str) -> None:
        """The attempt a finished message keeps holds what its HTTP target answered (the console's timeline)."""
        for message in messages:
            final = message.final_attempt
            answered_by_http = message.status in FINAL and final is not None and final.status_code is not None
            if answered_by_http and final is not None and final.response != answered:
                self.violate("timeline", f"{message.queue}/{message.id} kept {final.response!r} as its reply")

    # what reached the outside world ---------------------------------------------------------------
    def delivered(
        self,
        message: Message | None,
        queue: str,
        message_id: str,
        now: datetime,
        *,
        crashed: bool = False,
        started: bool = True,
    ) -> None:
        """An attempt reached a target: a message of the queue's live lifetime, on time (its first attempt,
        when nothing crashed and the queue was never paused) within the pacing its own lifetime asked for, and
        (`started`: `now` is when it started) inside its delivery window, its own or its queue's."""
        if message is None:
            return
        live = self.live(queue)
        if live is None or message.queue_epoch != live.epoch:
            self.violate("rule 3", f"{queue}/{message_id} of an earlier lifetime of {queue} reached a target")
            return
        window = message.window or live.window
        if started and window is not None and not window.is_open(now):
            self.violate("windows", f"{queue}/{message_id} started at {now.isoformat()}, outside its window")
        late = now - message.due_at
        if message.attempts == 1 and not crashed and not live.paused_ever and late > live.allowed_lateness(ON_TIME):
            self.violate(
                "rule 3",
                f"{queue}/{message_id} started {int(late.total_seconds())} s late "
                f"(its lifetime allows {int(live.allowed_lateness(ON_TIME).total_seconds())} s)",
            )

    def configured(self, name: str, epoch: datetime, doc: dict[str, Any] | None) -> None:
        """A PUT of queue `name` (its lifetime `epoch`) answered with success for settings `doc` (None: it died
        and its settings are unknown)."""
        rate, flow = (None, None) if doc is None else (doc.get("rate_limit"), doc.get("flow_control"))
        paced = self.paced.setdefault((name, epoch), Paced(rate, flow, doc is not None, doc is not None))
        paced.steady_rate &= doc is not None and rate == paced.rate
        paced.steady_flow &= doc is not None and flow == paced.flow

    def started(
        self,
        message: Message | None,
        now: datetime,
        *,
        own: Timer | None = None,
        crashed: bool = False,
        calendar: Callable[[str], Calendar] | None = None,
    ) -> None:
        """An attempt of `message` began reaching its target (the HTTP request or the SQS/SNS send) at `now`; `own`:
        the paced timer it started from, when the world handed that one over in time for its slot (else None), and
        `calendar`: the pacing slots its queue's store holds now (`check_due_start`)."""
        paced = None if message is None else self.paced.get((message.queue, message.queue_epoch))
        if message is not None and paced is not None:
            paced.starts.append((now, message.flow_key or ""))
            if own is not None and calendar is not None and not crashed:
                self.check_due_start(message, now, paced, own, calendar)

    def check_order(self, message: Message, others: Iterable[Message], state: KeyState, now: datetime) -> None:
        """An attempt of `message` of an ordered queue starts (v1.3): it is its key's head, no other message of the
        key is in flight, and (a first attempt) no message of the key that was due ORDER_SKEW before now and never
        started comes before it in due order (equal due times: creation order)."""
        name = f"{message.queue}/{message.id} (key {message.flow_key!r})"
        if state.head != message.id:
            self.violate("ordering", f"{name} started while its key's head is {state.head} (held: {state.held})")
        mine = (message.scheduled, message.created_at)
        first = message.attempts - message.attempts_base <= 1
        for other in others:
            if other.id == message.id:
                continue
            if other.status is Status.DELIVERING:
                self.violate("ordering", f"{name} started while {other.id} of its key is in flight")
            waited = other.status is Status.PENDING and other.attempts == other.attempts_base
            if first and waited and (other.scheduled, other.created_at) < mine and other.due_at + ORDER_SKEW <= now:
                self.violate(
                    "ordering",
                    f"{name} (due {message.scheduled.isoformat()}) started before {other.id} "
                    f"(due {other.scheduled.isoformat()}, waiting since {other.due_at.isoformat()})",
                )

    def check_due_start(
        self, message: Message, now: datetime, paced: Paced, own: Timer, calendar: Callable[[str], Calendar]
    ) -> None:
        """Below its limit a paced attempt starts at its due time (issue 34): a limit holds a start back only where
        it binds. Its floor is its due time, or a second after its timer was sent when that is later (a slot is
        never sooner: the timer must reach a dispatcher). Started more than the slot tolerance (the least of its
        scopes') after its floor, it must have met its limit there: another slot of one of its scopes within one
        spacing of its floor in the store's calendar (its own slot, the timer's, left out), or, with a concurrency
        limit, a refusal (the timer counts them: `waits`).

        Only where nothing else explains the lateness: a limit kept all the lifetime (no PUT moved its slots), a
        lifetime never paused, no crash in the whole story, and the timer handed over alone in its record no later
        than its slot (`World.handed`: the model's dispatcher threads share one fake clock). A give-way victim is
        judged from its new timer: no instant from its first floor to its old slot (now the taker's, at least 4 s
        after the give-way) was free, so a slot lies within a spacing of its new floor."""
        generation = self.of(message.queue, message.queue_epoch)
        if generation is None or generation.paused_ever or not (paced.steady_rate and paced.steady_flow) or own.waits:
            return
        key_rate = (paced.flow or {}).get("key_rate_limit")
        limits = {scope: rate for scope, rate in ((None, paced.rate), (message.flow_key or "", key_rate)) if rate}
        if not limits:
            return
        floor = max(message.due_at, from_ms(own.sent_ms + HANDOFF_LEAD_MS))
        tolerance = timedelta(microseconds=min(pace(rate).tolerance_us for rate in limits.values()))
        if now <= floor + tolerance + ROUNDING:
            return
        slots, floor_us = calendar(message.queue), to_ms(floor) * 1000
        for scope, rate in limits.items():
            near = [c for c in slots.get(scope, []) if abs(c - floor_us) < pace(rate).spacing_us]
            if any(-(-c // 1000) != own.due_ms for c in near):
                return  # the limit binds at its floor
        late = (now - floor).total_seconds()
        self.violate(
            "pacing",
            f"{message.queue}/{message.id} (key {message.flow_key!r}) started {late:.3f} s after its floor "
            f"{floor.isoformat()} (due {message.due_at.isoformat()}) with no other slot of its scopes within a "
            f"spacing of it (limits {limits})",
        )

    def check_rate_bounds(self) -> None:
        """Over any window of W >= 1 s at most r*W + max(1, r) attempts start: per lifetime for a steady
        `rate_limit`, per flow key (no key: the key "") for a steady `key_rate_limit`. Every start counts: first
        tries, retries, redeliveries, and both starts of an attempt a crash cut and a takeover repeated."""
        for (name, epoch), paced in self.paced.items():
            scope = f"{name} (created {epoch.isoformat()})"
            if paced.steady_rate and paced.rate is not None:
                self._check_bound(scope, paced.rate, [when for when, _ in paced.starts])
            key_rate = (paced.flow or {}).get("key_rate_limit")
            if paced.steady_flow and key_rate is not None:
                for key in sorted({key for _, key in paced.starts}):
                    starts = [when for when, own in paced.starts if own == key]
                    self._check_bound(f"{scope} key {key!r}", key_rate, starts)

    def _check_bound(self, scope: str, rate: float, starts: list[datetime]) -> None:
        times = sorted(starts)
        for width in BOUND_WINDOWS:
            most, first, last = max_in_window(times, timedelta(seconds=width))
            if most > rate * width + max(1, rate) + 1e-9:
                self.violate(
                    "rate bound",
                    f"{scope} at {rate}/s: {most} starts in the {width} s from {first.isoformat()} to "
                    f"{last.isoformat()} (bound {rate * width + max(1, rate):g})",
                )

    def signed(self, queue: str, headers: dict[str, str], body: bytes, now: datetime) -> None:
        """An HTTP attempt is signed with each secret its queue holds now (both during a key rotation), so a
        receiver that knows either one verifies it; unsigned when the queue holds none."""
        live = self.live(queue)
        if live is None:
            return
        if not live.secrets and "Hourglass-Signature" in headers:
            self.violate("rotation", f"{queue}: a callback signed though the queue holds no secret")
        for secret in live.secrets:
            if not verify(headers, body, secret, now=now.timestamp()):
                self.violate("rotation", f"{queue}: a receiver knowing only {secret!r} cannot verify a callback")

    def noticed(self, message_id: str, event: str) -> None:
        self.notices.setdefault(message_id, set()).add(event)

    def notice_received(self, doc: dict[str, Any], event: str) -> None:
        """A notice a destination took: a message's, or a queue's `queue.paused` (its breaker tripped)."""
        if doc.get("event") == "queue.paused":
            self.queue_notices.append(str(doc["queue"]))
            return
        self.noticed(doc["id"], event)

    def queue_notice_tried(self, queue: str, answer: str) -> None:
        self.queue_notice_tries.setdefault(queue, []).append(answer)

    def check_queue_notices(self) -> None:
        """A queue that paused itself while it had a failure destination (kept since) got its `queue.paused`
        notice at least once, unless the destination refused it for good or too often (a give-up)."""
        for generation in self.generations:
            if not generation.alive or not generation.paused_notice_owed:
                continue
            tries = self.queue_notice_tries.get(generation.name, [])
            if "permanent" in tries or len(tries) >= failure_notice.MAX_TRIES:
                continue
            if self.queue_notices.count(generation.name) <= generation.queue_notices_before:
                self.violate("rule 2/6", f"{generation.name} paused itself: no queue.paused notice arrived")

    def check_stretches(self, messages: Iterable[Message]) -> None:
        """Of a schedule's occurrences a closed window deferred to one opening, at most one went under `skip`
        or `latest` (the stretch's latest; `all` sends each): a window is no thundering herd of occurrences."""
        seen: set[tuple[str, str, datetime]] = set()
        for message in messages:
            generation = self.of(message.queue, message.queue_epoch)
            if generation is None or generation.window_changed or message.schedule is None:
                continue
            if message.schedule in generation.catch_up_all or message.status is not Status.DELIVERED:
                continue
            if message.redelivered or message.attempts != 1 or message.scheduled_at is None:
                continue  # only occurrences deferred when stored, delivered at their first attempt
            key = (message.queue, message.schedule, message.due_at)
            if key in seen:
                self.violate("windows", f"{message.queue}/{message.schedule}: two deferred occurrences at {key[2]}")
            seen.add(key)

    # checks over the stored state ---------------------------------------------------------------
    def check_messages(self, messages: Iterable[Message], now: datetime, verdicts: dict[str, str | None]) -> None:
        """Every accepted message ended, or has a way forward (liveness) and is not late beyond its bound;
        a failed or expired one with a destination got its notice; one whose target never refused never failed;
        and every attempt started so far kept the rate bounds. (Checked from here, not from the machine's `finish`:
        hypothesis seeds the fixed draws of `make test` with the machine class's source.)"""
        for message in messages:
            generation = self.of(message.queue, message.queue_epoch)
            name = f"{message.queue}/{message.id}"
            if verdicts.get(message.id) is None:
                self.violate("liveness", f"{name} {message.status.value} has no way forward")
            posted = self.flow.get(message.id)
            if posted is not None and posted != (message.flow_key, message.priority):
                self.violate("rule 1", f"{name} was posted with key and priority {posted}, has {message.flow_key!r}")
            if message.status not in FINAL:
                self._check_waiting(message, generation, now, name)
                continue
            if generation is None or not generation.alive:
                continue
            if message.status is Status.FAILED and not generation.target_failed_ever:
                self.violate("rule 1", f"{name} accepted, then failed at a target that accepts everything")
            self._check_notice(message, generation, name)
        self.check_rate_bounds()

    def _check_waiting(self, message: Message, generation: Generation | None, now: datetime, name: str) -> None:
        if generation is not None and generation.alive and generation.paused:
            return  # a paused queue's messages wait, pending, for the resume
        bound = generation.allowed_lateness() if generation is not None and generation.alive else SLACK
        if message.due_at + bound < now:
            owner = "a deleted queue" if generation is None or not generation.alive else "its queue"
            self.violate(
                "rule 3" if owner == "a deleted queue" or (generation and generation.slowest_rate) else "liveness",
                f"{name} of {owner} still {message.status.value} {int((now - message.due_at).total_seconds())} s "
                f"after its due time",
            )

    def _check_notice(self, message: Message, generation: Generation, name: str) -> None:
        if message.status not in (Status.FAILED, Status.EXPIRED) or generation.destination is None:
            return
        if generation.destination_since is None or message.created_at < generation.destination_since:
            return  # the destination changed during its life: which one it was owed is not the model's to say
        if message.id not in self.notices and not gave_up(message):
            self.violate("rule 2/6", f"{name} ended {message.status.value}: no notice and no visible give-up")

    def check_schedules(self, listed: dict[str, list[str]]) -> None:
        """A queue lists exactly the schedules of its own lifetime."""
        for name, names in listed.items():
            generation = self.live(name)
            own = set() if generation is None else set(generation.schedules)
            for schedule in names:
                if schedule not in own:
                    self.violate("rule 3", f"{name} lists schedule {schedule} of an earlier lifetime")


def max_in_window(times: list[datetime], width: timedelta) -> tuple[int, datetime, datetime]:
    """The most of the sorted `times` in one closed window [x, x + width], and its first and last of them."""
    best = (0, datetime.min, datetime.min)
    first = 0
    for last, when in enumerate(times):
        while when - times[first] > width:
            first += 1
        if last - first + 1 > best[0]:
            best = (last - first + 1, times[first], when)
    return best


def gave_up(message: Message) -> bool:
    """Whether the message shows that its notice was given up (its document's `notice.status`)."""
    return message.notice is not None and message.notice.status is NoticeStatus.ABANDONED


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A message document without what differs between two runs of one story (ids, instants)."""
    return {key: doc.get(key) for key in COMPARED}
