"""Who holds a scope's future pacing slots: the record kept on the scope's pacing item, so that any process may
give a slot held by a lower priority to a higher one (`pacing.give_way`). Its rules: encoding, adding, swapping.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence

from hourglass.core.admission import MAX_PRIORITY
from hourglass.core.pacing import Held, Slot, Start

# Entries this far before the writer's now are dropped at its write: no give-way takes a slot less than 4 s ahead,
# and a re-deal deals out again only slots at least 1 s after its send (a slot must stay listed while anyone could
# still deal it out again), with a second of clock skew between processes to spare.
PAST_MS = 3_000
# The ids `core.ids.new_id` makes (uuid4 hex), kept in 16 bytes of base64url.
_RANDOM_ID = re.compile(r"[0-9a-f]{32}")


def parse(text: str | None, scope: str) -> list[Held]:
    """The entries of a record (None or "": none), in slot order."""
    entries = []
    start = 0
    for part in (text or "").split():
        delta, width, flags, version, holder = part.split(".", 4)
        start += int(delta, 16)
        slot = Slot(start, start + int(width, 16), flags[0] == "q")
        packed = flags[1:2] == "b"
        priority = int(flags[2:] if packed else flags[1:])
        entries.append(Held(slot, scope, priority, _unpacked(holder) if packed else holder, int(version, 16)))
    return entries


def render(entries: Iterable[Held]) -> str | None:
    """The record's text (None: no entry, the attribute is removed): in slot order, each start as the step from
    the one before, a random id in 22 characters (base64url) instead of 32."""
    parts, previous = [], 0
    for held in sorted(entries, key=lambda h: h.slot.start_ms):
        parts.append(_entry(held, previous))
        previous = held.slot.start_ms
    return " ".join(parts) or None


def _entry(held: Held, previous: int) -> str:
    slot = held.slot
    packed = _RANDOM_ID.fullmatch(held.id) is not None
    holder = base64.urlsafe_b64encode(bytes.fromhex(held.id)).decode().rstrip("=") if packed else held.id
    flags = f"{'q' if slot.queue_scoped else 'n'}{'b' if packed else ''}{held.priority}"
    return f"{slot.start_ms - previous:x}.{slot.latest_ms - slot.start_ms:x}.{flags}.{held.version:x}.{holder}"


def _unpacked(holder: str) -> str:
    return base64.urlsafe_b64decode(holder + "==").hex()


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
    long as the text stays within `room` characters. An entry is never dropped to make room: a slot must stay
    listed while someone could take it or deal it out again."""
    leaving = {held.id for held in added} | set(forget)
    kept = [held for held in entries if held.slot.start_ms >= now_ms - PAST_MS and held.id not in leaving]
    for held in sorted(added, key=lambda h: h.slot.start_ms):
        # Each entry's length depends on its neighbour (its start is a step), so the whole text is measured.
        if len(render([*kept, held]) or "") > room:
            break
        kept.append(held)
    return sorted(kept, key=lambda h: h.slot.start_ms)


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
