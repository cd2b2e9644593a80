"""Who holds a scope's future pacing slots: the record kept on the scope's pacing item, so that any process may
give a slot held by a lower priority to a higher one (`pacing.give_way`). Its rules: encoding, adding, swapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hourglass.core.admission import MAX_PRIORITY
from hourglass.core.pacing import Held, Slot, Start

# Entries this far past are dropped at the next write: no give-way (4 s+ ahead) nor re-deal (1 s+ ahead) looks
# at them, and a slot must stay listed while anyone could still deal it out again.
PAST_MS = 60_000


def parse(text: str | None, scope: str) -> list[Held]:
    """The entries of a record (None or "": none), in slot order."""
    entries = []
    for part in (text or "").split():
        start, width, flags, version, holder = part.split(".", 4)
        slot = Slot(int(start, 16), int(start, 16) + int(width, 16), flags[0] == "q")
        entries.append(Held(slot, scope, int(flags[1:]), holder, int(version, 16)))
    return entries


def render(entries: Iterable[Held]) -> str | None:
    """The record's text (None: no entry, the attribute is removed)."""
    parts = [_entry(held) for held in entries]
    return " ".join(parts) or None


def _entry(held: Held) -> str:
    slot = held.slot
    flags = f"{'q' if slot.queue_scoped else 'n'}{held.priority}"
    return f"{slot.start_ms:x}.{slot.latest_ms - slot.start_ms:x}.{flags}.{held.version:x}.{held.id}"


def listed(start: Start) -> bool:
    """Whether a start's slot is recorded: it names its message version, and a higher priority may come."""
    return start.holder is not None and start.priority < MAX_PRIORITY


def recorded(
    entries: Sequence[Held],
    added: Sequence[Held],
    now_ms: int,
    room: int,
    *,
    forget: Iterable[str] = (),
) -> list[Held]:
    """The record after an allocation: entries well past dropped, and those of a message that now takes another
    slot (it leaves its old one) or gives its slot up (`forget`: a re-deal); then the new ones, in slot order, as
    long as the text stays within `room` characters. An entry is never dropped to make room: new slots are later
    than every listed one, and a slot must stay listed while someone could take it."""
    leaving = {held.id for held in added} | set(forget)
    kept = [held for held in entries if held.slot.start_ms >= now_ms - PAST_MS and held.id not in leaving]
    size = len(render(kept) or "")
    for held in sorted(added, key=lambda h: h.slot.start_ms):
        extra = len(_entry(held)) + (1 if kept else 0)
        if size + extra > room:
            break
        kept.append(held)
        size += extra
    return kept


def swapped(entries: Sequence[Held], victim: Held, taker: Held | None, fresh: Slot) -> list[Held]:
    """The record once `taker` holds `victim`'s slot and the victim `fresh` (the slot allocated to the taker):
    the victim's entry names the taker (or goes, when the taker is not listed), and the entry of `fresh`, which
    named the taker, goes (the victim is not listed there: its new version is the mover's to know)."""
    out = []
    for held in entries:
        if held == victim:
            if taker is not None:
                out.append(taker)
        elif held.slot.start_ms != fresh.start_ms:
            out.append(held)
    return out


def taken(entries: Sequence[Held], moving: Sequence[Held]) -> bool:
    """Whether any of `moving` (slots as they were handed out, with their holders) now has another holder in the
    record: a higher priority took it, so those slots must not be dealt out again."""
    holder = {held.slot.start_ms: (held.id, held.version) for held in entries}
    return any(holder.get(m.slot.start_ms, (m.id, m.version)) != (m.id, m.version) for m in moving)
