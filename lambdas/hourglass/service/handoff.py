"""The hand-off of a message version: placed by `core.handoff`, paced at its queue's rate, written, its timer sent.

Timer first (`ingest`: POST, the bulk writer): refused timers leave their items to the due index.
Item first (`hand_off`, `written_first`: dedup ingest, PATCH, retries, redeliver, occurrences, bulk operations; and
the sweep's claims): a refused timer's lease runs out or is given back. Either way, an item whose write outlasted
the safety margin is handed off by its writer (`catch_up`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from hourglass.adapters import storage
from hourglass.core import handoff, holders, pacing, schedule
from hourglass.core.handoff import Claim, DueEntry, Placement, Scheduled, Timer, Timing
from hourglass.core.model import Message
from hourglass.core.pacing import Held, Rates, Slot, Start
from hourglass.core.schedule import SweepKeys
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.errors import StoreError, TimerQueueError
from hourglass.logs import log
from hourglass.service.due_widths import DueWidths
from hourglass.service.pacing import Pacer

Release = Callable[[Claim], None]
Stored = TypeVar("Stored", bound=Message | None)
# Stores a message version as its placement says (leased, indexed); conditional, so None (or an error) when
# nothing was stored.
Write = Callable[[Message, Placement], Stored]
# A queue's rate limits (None: unlimited), for the claims of a hand-off whose slots went by before their send.
RatesOf = Callable[[str], Rates | None]
# Moves a pending message version (queue, id, version), not begun, to a later pacing slot so a higher priority
# takes its own (`service.give_way`), in one transaction with the fences (the records' change): the new
# version's claim, whose timer is to be sent; None when it began, changed or ended, or the record changed.
GiveWayTo = Callable[[str, str, int, Slot, datetime, Sequence[dict[str, Any]]], Claim | None]
# Victims a start tries in turn when the one before began, changed or ended meanwhile ...
GIVE_WAY_TRIES = 3
# ... and how often a batch looks again when another process changed the record meanwhile.
RECORD_CHANGES = 8


class Moved(enum.Enum):
    """How a give-way went (`HandOff._move`)."""

    YES = "yes"
    VICTIM_LOST = "victim_lost"
    RECORD_CHANGED = "record_changed"


# A claim takes a later slot at its send only if its lease still ends at least this long after it: the recovery
# sweep must not take the message over before its dispatcher begins the attempt.
LEASE_LEFT = timedelta(seconds=schedule.LEASE_AFTER_DUE / 2)


class HandOff:
    def __init__(
        self,
        timers: storage.Timers,
        timing: Timing,
        *,
        release: Release | None = None,
        claim: storage.ClaimEntry | None = None,
        metrics: Any = None,
        pacer: Pacer | None = None,
        clock: Callable[[], datetime] | None = None,
        give_way: GiveWayTo | None = None,
        widths: DueWidths | None = None,
    ) -> None:
        self.timers = timers
        self.give_way = give_way
        # Index entries are placed at this process's bucket widths, and counted towards the buckets' records.
        self.widths = widths
        self.timing = timing if widths is None else replace(timing, widths=widths.widths)
        self.release = release
        self.claim = claim
        self.metrics = metrics
        self.pacer = pacer
        self.clock = clock

    def hand_off(self, message: Message, now: datetime, rate: Rates | None, write: Write[Stored]) -> Stored:
        """The whole hand-off of one message version written first (see `written_first`)."""
        return self.written_first([message], now, rate, write)[0]

    def written_first(
        self,
        messages: Sequence[Message],
        now: datetime,
        rate: Rates | None,
        write: Write[Stored],
        *,
        each: Callable[..., Iterable[Stored]] = map,
    ) -> list[Stored]:
        """Message versions whose items are written before their timers: placed, a rate-limited queue's
        timers paced together in due order (one pacing write), each stored by `write` (`each` maps it:
        a pool's map writes them at once), then the timers of what was stored sent together. A refused
        timer keeps its lease, which runs out, and the recovery sweep hands the message off; one stored
        with index keys only is handed off by its writer if a sweep may have passed it (`catch_up`).
        An error of `write` propagates, and nothing more is sent."""
        placed = self._placed(lambda: [handoff.place(m, now, self.timing, written_first=True) for m in messages])
        placements = self.pace(placed, rate, now)
        stored = list(each(write, messages, placements))
        done = [(placement, s) for placement, s in zip(placements, stored, strict=True) if s is not None]
        claims = [claim for claim in (placement.claim() for placement, _ in done) if claim is not None]
        self.send_claimed(claims, now, give_back=False, rates=lambda _: rate)
        self.catch_up([s for placement, s in done if placement.timer is None and placement.keys is not None], now, rate)
        return stored

    def ingest(
        self,
        messages: Sequence[Message],
        now: datetime,
        rate: Rates | None,
        write: Callable[[list[tuple[Message, SweepKeys | None]]], None],
        *,
        first: Sequence[Message] = (),
        write_first: Write[Message | None] | None = None,
    ) -> None:
        """New messages: those of `first` (a dedup id: their write decides whether they exist) are each
        stored by `write_first` with a lease (None: nothing stored); then every timer goes out at once,
        all or none; then `messages` are stored by `write`, with index keys only where no timer was sent.
        One pacing write for all, in due order."""
        placed = self._placed(
            lambda: [
                *(handoff.place(m, now, self.timing, written_first=True) for m in first),
                *(handoff.place(m, now, self.timing, written_first=False) for m in messages),
            ]
        )
        placements = self.pace(placed, rate, now)
        leased, timed = placements[: len(first)], placements[len(first) :]
        stored = self._stored_each(write_first, first, leased, now, rate) if write_first else []
        done = [(placement, s) for placement, s in zip(leased, stored, strict=True) if s is not None]
        claims = [claim for claim in (placement.claim() for placement, _ in done) if claim is not None]
        sent = self.send_first([p.timer for p in [*(p for p, _ in done), *timed] if p.timer is not None], rate)
        if not sent:
            self.give_back(claims)
        write([(m, p.index_keys(sent=sent)) for m, p in zip(messages, timed, strict=True)])
        waiting = [s for placement, s in done if placement.timer is None and placement.keys is not None]
        indexed = [m for m, p in zip(messages, timed, strict=True) if p.index_keys(sent=sent) is not None]
        self.catch_up(waiting + indexed, now, rate)

    def _stored_each(
        self,
        write: Write[Message | None],
        messages: Sequence[Message],
        placements: Sequence[Placement],
        now: datetime,
        rate: Rates | None,
    ) -> list[Message | None]:
        """Each message stored by `write` in turn. When one raises, the timers of those stored before it are sent
        before the error propagates: the client retries the request and gets them back as duplicates, which hand
        nothing off, so their leases would hold them until the recovery sweep (minutes late)."""
        stored: list[Message | None] = []
        for message, placement in zip(messages, placements, strict=True):
            try:
                stored.append(write(message, placement))
            except Exception:
                done = [p.claim() for p, s in zip(placements, stored, strict=False) if s is not None]
                try:
                    self.send_claimed([c for c in done if c is not None], now, rates=lambda _: rate)
                except (StoreError, TimerQueueError) as exc:
                    log("handoff_before_error_failed", count=len(done), error=str(exc))
                raise
        return stored

    def _placed(self, place: Callable[[], list[Placement]]) -> list[Placement]:
        """The placements, counted towards their buckets' widths; placed again if that widened a bucket."""
        placed = place()
        if self.widths is not None and self.widths.placed(placement.keys for placement in placed):
            return place()
        return placed

    def pace(self, placements: Sequence[Placement], rate: Rates | None, now: datetime) -> list[Placement]:
        """Slots for the timers of one queue's hand-off batch, in due order, from one pacing write.
        Without a rate (unlimited queue) nothing is read or written."""
        timed = [i for i, placement in enumerate(placements) if placement.timer is not None]
        if rate is None or self.pacer is None or not timed:
            return list(placements)
        timers = [placements[i].timer.timer for i in timed]  # type: ignore[union-attr]
        # Slots from the time of the allocation, not of the request: a slow request must not start
        # its batch with slots that are already (nearly) past.
        now = self._now(now)
        starts = [t.start(t.due_ms) for t in timers]
        allocated = self.pacer.scoped_slots(timers[0].queue, rate, starts, now)
        slots = self.take_held(timers[0].queue, rate, starts, allocated, now)
        paced = list(placements)
        for index, slot in zip(timed, slots, strict=True):
            paced[index] = handoff.paced(placements[index], slot, now, self.timing)
        return paced

    def take_held(
        self, queue: str, rate: Rates, starts: Sequence[Start], slots: Sequence[Slot], now: datetime
    ) -> list[Slot]:
        """A batch's starts take earlier slots of their scopes held by lower priorities (`pacing.give_way`): those
        the scopes' records of who holds them show (`core.holders`, written with the allocations, whichever
        process handed the slots off) and those this process handed off (`HeldSlots`). Each victim is moved to
        the start's fresh slot in one transaction with the record's change; where that loses, the start tries
        the next one, a few times, and else keeps its own slot. Only with priorities that differ is anything
        written."""
        taken = list(slots)
        if self.give_way is None or self.pacer is None:
            return taken
        tried: set[tuple[str, int]] = set()
        trying = list(range(len(starts)))
        tries = changes = 0
        while tries < GIVE_WAY_TRIES:
            victims = self._victims(queue, rate, starts, slots, trying, now)
            held = [h for h in victims if (h.id, h.version) not in tried]
            chosen = pacing.give_way(
                held, [starts[i] for i in trying], [slots[i] for i in trying], to_ms(now), keyed=rate.key is not None
            )
            self.pacer.held.forget(queue, rate, [way.victim for way in chosen])
            lost, changed = [], False
            for way in chosen:
                index = trying[way.index]
                outcome = self._move(queue, rate, way.victim, starts[index], slots[index], now)
                if outcome is Moved.YES:
                    taken[index] = way.victim.slot
                    continue
                lost.append(index)
                if outcome is Moved.VICTIM_LOST:
                    tried.add((way.victim.id, way.victim.version))
                changed |= outcome is Moved.RECORD_CHANGED
            if not lost:
                break
            trying = lost
            # Another process changed the record meanwhile (it gave way too): look again, without using up a try.
            if changed and changes < RECORD_CHANGES:
                changes += 1
                continue
            tries += 1
        return taken

    def _victims(
        self,
        queue: str,
        rate: Rates,
        starts: Sequence[Start],
        slots: Sequence[Slot],
        trying: list[int],
        now: datetime,
    ) -> list[Held]:
        """The slots held in the starts' scopes: the records' of the windows between the earliest a start may take
        (`pacing.give_way`'s floor) and the latest of their own slots, and this process's notes of slots they do
        not list."""
        assert self.pacer is not None
        first_ms = min(max(starts[i].due_ms, to_ms(now) + pacing.GIVE_WAY_MARGIN_MS) for i in trying)
        until_ms = max(slots[i].start_ms for i in trying)
        recorded = self.pacer.holders(queue, rate, {starts[i].scope for i in trying}, first_ms, until_ms)
        listed = {h.slot.start_ms for h in recorded}
        noted = self.pacer.held.candidates(queue, rate, to_ms(now))
        return [*recorded, *(h for h in noted if h.slot.start_ms not in listed)]

    def _move(self, queue: str, rate: Rates, victim: Held, start: Start, fresh: Slot, now: datetime) -> Moved:
        """The victim waits for `fresh` now (its new version's timer sent) and the record names the start at the
        victim's slot; or it keeps its own: its write lost (it began, changed or ended), or the record changed
        meanwhile (read again)."""
        assert self.give_way is not None and self.pacer is not None
        taker = None
        if start.holder is not None and holders.listed(start):
            taker = Held(victim.slot, victim.scope, start.priority, *start.holder)
        swap = self.pacer.swap(queue, rate, victim, taker, fresh)
        try:
            moved = self.give_way(queue, victim.id, victim.version, fresh, now, swap.fences)
        except StoreError as exc:
            log("give_way_failed", id=victim.id, queue=queue, error=str(exc))
            moved = None
        if moved is None:
            if self.pacer.refresh(swap):
                return Moved.RECORD_CHANGED
            return Moved.VICTIM_LOST
        self.pacer.settle(swap)
        # Its old timer is dropped now, whether or not this one is taken (refused, its lease runs out and the
        # recovery sweep hands it off): the slot is the start's either way.
        self.send_claimed([moved], now, give_back=False)
        self._count("GaveWay", 1)
        return Moved.YES

    def send_first(self, timers: Sequence[Scheduled], rate: Rates | None = None) -> bool:
        """Timers of items not written yet, all or none; False: SQS refused, the items go to the due index."""
        if not timers:
            return True
        timers = self._fresh(timers)
        try:
            self.timers.send_all(timers)
        except TimerQueueError as exc:
            log("handoff_fallback", count=len(timers), error=str(exc))
            self._count("HandoffFallback", len(timers))
            return False
        self._count("HandedOff", len(timers))
        self._note([s.timer for s in timers], lambda _: rate)
        return True

    def send_claimed(
        self, claims: Sequence[Claim], now: datetime, *, give_back: bool = True, rates: RatesOf | None = None
    ) -> list[Claim]:
        """Timers of stored, leased items; returns the refused ones, whose leases are given back.

        `give_back=False` where no sweep comes back for them sooner (PATCH, retries): their lease
        runs out and the recovery sweep hands them off, at no extra write. With `rates`, paced claims
        whose slots are too near by now keep their order (`in_slot_order`).
        """
        if not claims:
            return []
        # Timed from the send, not from when the claims were made: a sweep slowed by load (or a bulk
        # load beside it) would otherwise send timers whose delays are already partly spent, late by its own duration.
        sent_at = self._now(now)
        if rates is not None:
            claims = self.in_slot_order(claims, sent_at, rates)
        timers = [handoff.timer_for(claim.entry, sent_at, claim.slot, chained=claim.chained) for claim in claims]
        sent = self.timers.send(timers)
        refused = {(s.timer.queue, s.timer.id) for s in sent}
        failed = [claim for claim in claims if (claim.entry.queue, claim.entry.id) in refused]
        if failed:
            # Reported, not raised: the stored item keeps its due-index keys and lease, so the
            # message stays deliverable (a sweep takes it once the lease is given back or ends).
            log("timer_refused", count=len(failed), ids=[c.entry.id for c in failed[:10]], give_back=give_back)
            self._count("TimerRefused", len(failed))
        if give_back:
            self.give_back(failed)
        if rates is not None:
            self._note([s.timer for s in timers if (s.timer.queue, s.timer.id) not in refused], rates)
        return failed

    def in_slot_order(self, claims: Sequence[Claim], now: datetime, rates: RatesOf) -> list[Claim]:
        """Paced claims whose slots are too near to be reached by a timer sent `now` (the claims of a batch
        slowed by load took that long) take the slots of their batch's later ones, which take new ones at the end
        of the line (`pacing.dealt_again`, one pacing write per queue or flow key). Sent as they were, each would
        miss its slot and be re-paced by its dispatcher after every later-due message of the batch had started."""
        dealt = list(claims)
        if self.pacer is None:
            return dealt
        for (queue, scope), group in _paced_groups(claims, rates).items():
            rate = rates(queue)
            late = [i for i, slot in group if pacing.too_near(slot, to_ms(now))]
            if rate is None or not late:
                continue
            # The fresh slots name no holder, and the group's entries leave the record in the same write: dealt
            # out again, a slot's holder is not the one the record names. Not at all if one was given away.
            moving = [
                Held(slot, scope, claims[i].entry.priority, claims[i].entry.id, claims[i].entry.version)
                for i, slot in group
            ]
            again = [replace(claims[i].entry.start(), holder=None) for i in late]
            try:
                fresh = self.pacer.redeal(queue, rate, moving, again, now)
            except StoreError as exc:
                log("redeal_failed", queue=queue, count=len(late), error=str(exc))
                continue
            if fresh is None:
                log("redeal_skipped", queue=queue, count=len(late))
                continue
            new = list(zip((i for i, _ in group), pacing.dealt_again([slot for _, slot in group], fresh), strict=True))
            # A slot moves later by about the batch's claim time: this holds unless that took a minute.
            if all(to_ms(claims[i].lease - LEASE_LEFT) >= slot.start_ms for i, slot in new):
                for index, slot in new:
                    dealt[index] = replace(claims[index], slot=slot)
                self._count("Redealt", len(late))
        return dealt

    def catch_up(self, written: Sequence[Message], started: datetime, rate: Rates | None = None) -> int:
        """Messages just stored with due-index keys and no timer, whose hand-off window opened while
        their write was in flight (a slow, retried write): a sweep may have moved its watermark past
        them, so their writer claims and hands them off (the claim is conditional: whoever claims
        first hands off). Never raises: what fails here waits for the recovery sweep."""
        if self.claim is None or self.clock is None or not written:
            return 0
        now = self.clock()
        late = [
            DueEntry.of(message) for message in written if handoff.overtaken(message.due_at, started, now, self.timing)
        ]
        if not late:
            return 0
        try:
            claims = self._claim_late(late, rate, now)
            self.send_claimed(claims, now, rates=lambda _: rate)
        except (StoreError, TimerQueueError) as exc:
            log("catch_up_failed", count=len(late), error=str(exc))
            return 0
        log("overtaken", count=len(claims), ids=[claim.entry.id for claim in claims[:10]])
        self._count("Overtaken", len(claims))
        return len(claims)

    def _claim_late(self, late: list[DueEntry], rate: Rates | None, now: datetime) -> list[Claim]:
        assert self.claim is not None
        slots: Sequence[Slot | None] = [None] * len(late)
        if rate is not None and self.pacer is not None:
            slots = self.pacer.scoped_slots(late[0].queue, rate, [entry.start() for entry in late], now)
        claims = []
        for entry, slot in zip(late, slots, strict=True):
            lease = schedule.claim_lease(from_ms(entry.due_ms if slot is None else slot.start_ms), now)
            moved = handoff.moved_keys(entry, slot, self.timing)
            if self.claim(entry, now=now, lease_until=lease, move_to=moved) is not None:
                claims.append(Claim(entry, lease, slot))
        return claims

    def give_back(self, claims: Sequence[Claim]) -> None:
        """Releases leases whose timers were never sent, so the next sweep takes them at once."""
        for claim in claims:
            if self.release is None or not claim.written:
                continue
            try:
                self.release(claim)
            except StoreError as exc:
                # The lease then runs out and the recovery sweep hands the message off.
                log("release_failed", id=claim.entry.id, queue=claim.entry.queue, error=str(exc))

    def resend(self, timers: Sequence[Scheduled]) -> None:
        """Timers that came back early or before their item was written; raises if SQS refuses them."""
        self.timers.send_all(timers)

    def _note(self, timers: Sequence[Timer], rates: RatesOf) -> None:
        """Paced timers just sent: their slots are what their message versions wait for, which a higher priority
        handed off later in this process may take (`take_held`)."""
        if self.pacer is None or self.give_way is None:
            return
        held: dict[tuple[str, Rates], list[Held]] = {}
        for timer in timers:
            rate = rates(timer.queue)
            if timer.slot is None or rate is None:
                continue
            scope = timer.scope if rate.key is not None else ""
            held.setdefault((timer.queue, rate), []).append(
                Held(timer.slot, scope, timer.priority, timer.id, timer.version)
            )
        for (queue, rate), line in held.items():
            self.pacer.held.note(queue, rate, line)

    def _now(self, fallback: datetime) -> datetime:
        return self.clock() if self.clock is not None else fallback

    def _fresh(self, timers: Sequence[Scheduled]) -> list[Scheduled]:
        """A paced timer's delay counted from the send, not from the request's start: it has to reach a
        dispatcher within its slot's tolerance. Unlimited queues' timers are sent as planned."""
        if self.clock is None or all(s.timer.latest_ms is None for s in timers):
            return list(timers)
        now = self.clock()
        return [s if s.timer.latest_ms is None else Scheduled(s.timer, handoff.delay_of(s.timer, now)) for s in timers]

    def _count(self, name: str, value: int) -> None:
        if self.metrics is not None:
            self.metrics.count(name, value)


def _paced_groups(claims: Sequence[Claim], rates: RatesOf) -> dict[tuple[str, str], list[tuple[int, Slot]]]:
    """The paced claims (index, slot) per queue, and per flow key where the queue limits keys too: a slot keeps
    the bound of every scope it was allocated in, so slots move only within one."""
    groups: dict[tuple[str, str], list[tuple[int, Slot]]] = {}
    for index, claim in enumerate(claims):
        if claim.slot is None:
            continue
        rate = rates(claim.entry.queue)
        scope = claim.entry.start().scope if rate is not None and rate.key is not None else ""
        groups.setdefault((claim.entry.queue, scope), []).append((index, claim.slot))
    return groups
