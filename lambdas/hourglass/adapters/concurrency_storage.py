"""Concurrency lease slots in the table: `#slot#nnnn` (a flow key's: `#slot#k#<key>#nnnn`) in the partition of the
queue's slot layout (`keys.slot_pk`), read, then taken with one conditional write; given back only by an attempt that
leaves no outcome."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hourglass.adapters.items import KEEP_FV, Item, checked, fv_value, n, s
from hourglass.adapters.pacing_storage import KEY_IDLE_TTL_S
from hourglass.adapters.table import Table
from hourglass.core.concurrency import Lease, attempt_ended, held_by, is_free, probe_order
from hourglass.core.keys import message_pk, message_sk, slot_key, slot_pk
from hourglass.core.model import Status
from hourglass.errors import StaleVersionError


class ConcurrencyStorage(Table):
    def acquire_slot(
        self,
        queue: str,
        limit: int,
        holder: str,
        until_ms: int,
        now_ms: int,
        seed: int = 0,
        flow_key: str | None = None,
        layout: int = 1,
        epoch_ms: int = 0,
    ) -> Lease | None:
        """One free slot of `limit` for `holder` until `until_ms`, or None when the probed ones are all held.
        `flow_key`: a slot of that key, which expires (TTL) once idle, so idle keys cost nothing.

        The probed slots are read first (strongly consistent, read units), then the messages of their live
        holders, so that only a slot seen free is written: one conditional write, on the slot as it was read
        (`until` passed, or the same holder and `until` when that holder's attempt ended), so two takers of
        the same slot cannot both win. Released slots (`until` 0) and lease-expired ones count as free."""
        probes, wanted = probe_order(holder, limit, seed), Lease(0, holder, until_ms, flow_key, layout, epoch_ms)
        lease, raced = self._try_probes(queue, probes, wanted, now_ms)
        if lease is None and raced:
            # Lost a slot seen free to another taker, which may be a stale timer about to give it back or whose
            # message has moved on (its attempt then counts as ended): read once more before refusing.
            lease, _ = self._try_probes(queue, probes, wanted, now_ms)
        return lease

    def _try_probes(self, queue: str, probes: tuple[int, ...], wanted: Lease, now_ms: int) -> tuple[Lease | None, bool]:
        """One round: the probed slots read, then one conditional write on one seen free; (lease, lost a race)."""
        own_id = held_by(wanted.holder)[0]
        own = (message_pk(queue, own_id), message_sk(own_id))
        keys = [_slot_key(queue, replace(wanted, slot=slot)) for slot in probes]
        slots = self._read([*keys, own], "holder, #until, #st, version", {"#until": "until", "#st": "status"})
        if _moved_on(wanted.holder, slots.get(own)):
            # A stale timer (its message patched, moved by a higher priority, ended): it will not begin, so it
            # takes no slot from the attempt the slot is now meant for.
            return None, False
        states = [(slot, slots.get(key, {})) for slot, key in zip(probes, keys, strict=True)]
        free = [slot for slot, item in states if is_free(_until(item), now_ms)]
        for slot in free:
            lease = replace(wanted, slot=slot)
            if self._take(queue, lease, "attribute_not_exists(#until) OR #until < :now", {":now": n(now_ms)}):
                return lease, False
        raced = bool(free)
        held = {slot: item for slot, item in states if slot not in free and "holder" in item}
        ended = self._ended(queue, [item["holder"]["S"] for item in held.values()])
        for slot, item in held.items():
            if item["holder"]["S"] not in ended:
                continue
            lease = replace(wanted, slot=slot)
            was = {":old": item["holder"], ":old_until": item["until"]}
            if self._take(queue, lease, "holder = :old AND #until = :old_until", was):
                return lease, False
            raced = True
        return None, raced

    def release_slot(self, queue: str, lease: Lease) -> None:
        """Frees the slot if `lease`'s holder still has it (a late release of an older holder is a no-op). Only
        for an attempt that gives its slot back without an outcome on its message (refused by another scope,
        not begun, crashed in-process): an outcome already frees the slot (`attempt_ended`)."""
        try:
            self._conditional(
                "update_item",
                f"slot {lease.slot} of {queue} has another holder",
                TableName=self.table,
                Key=_slot_item_key(queue, lease),
                UpdateExpression="SET #until = :zero",
                ConditionExpression="holder = :me",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":me": s(lease.holder), ":zero": n(0)},
            )
        except StaleVersionError:
            return

    def _take(self, queue: str, lease: Lease, condition: str, values: dict[str, Any]) -> bool:
        """Writes `lease` over the slot if `condition` still holds of it (False, one write unit, if not)."""
        update = f"SET holder = :me, #until = :until, {KEEP_FV}"
        values = {**values, ":me": s(lease.holder), ":until": n(lease.until_ms), **fv_value("slot")}
        if lease.flow_key is not None or lease.layout > 1:
            # An idle key's slots, and every slot in a partition of its own (which a queue's DELETE does not
            # Query), are left to the table's TTL.
            update += ", expire_at = :ttl"
            values[":ttl"] = n(lease.until_ms // 1000 + KEY_IDLE_TTL_S)
        return self._updated(
            f"slot {lease.slot} of {queue} is held",
            Key=_slot_item_key(queue, lease),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#until": "until"},
            ExpressionAttributeValues=values,
        )

    def _ended(self, queue: str, holders: list[str]) -> set[str]:
        """The holders whose attempt is over, from their messages' items (one strongly consistent read)."""
        if not holders:
            return set()
        # Distinct keys (BatchGetItem refuses duplicates): one holder may have kept two slots (a release lost).
        wanted = sorted({_message_key(queue, h) for h in holders})
        found = self._read(wanted, "#st, version", {"#st": "status"})
        return {h for h in holders if _moved_on(h, found.get(_message_key(queue, h)))}

    def _read(self, keys: list[tuple[str, str]], projection: str, names: dict[str, str]) -> dict[tuple[str, str], Item]:
        """These items (pk, sk) that exist (strongly consistent): slots and their holders' messages."""
        request: dict[str, Any] = {
            self.table: {
                "Keys": [{"pk": s(pk), "sk": s(sk)} for pk, sk in keys],
                "ConsistentRead": True,
                "ProjectionExpression": f"pk, sk, fv, {projection}",
                "ExpressionAttributeNames": names,
            }
        }
        found: dict[tuple[str, str], Item] = {}
        while request:
            answer = self._guard("batch_get_item", RequestItems=request)
            for item in answer.get("Responses", {}).get(self.table, []):
                found[(item["pk"]["S"], item["sk"]["S"])] = item
            request = answer.get("UnprocessedKeys") or {}
        return found


def _slot_key(queue: str, lease: Lease) -> tuple[str, str]:
    pk = slot_pk(queue, lease.slot, lease.flow_key, lease.layout, lease.epoch_ms)
    return pk, slot_key(lease.slot, lease.flow_key)


def _slot_item_key(queue: str, lease: Lease) -> Item:
    pk, sk = _slot_key(queue, lease)
    return {"pk": s(pk), "sk": s(sk)}


def _message_key(queue: str, holder: str) -> tuple[str, str]:
    """(pk, sk) of the message a holder's attempt is of (in a spread queue, maybe a partition of its own)."""
    message_id = held_by(holder)[0]
    return message_pk(queue, message_id), message_sk(message_id)


def _moved_on(holder: str, item: Item | None) -> bool:
    """Whether `holder`'s attempt is over (`attempt_ended`), from its message item as read (None: no item)."""
    if item is None:
        return False
    checked("message", item)
    return attempt_ended(holder, Status(item["status"]["S"]), int(item["version"]["N"]))


def _until(item: Item) -> int | None:
    return int(checked("slot", item)["until"]["N"]) if "until" in item else None
