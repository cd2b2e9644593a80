"""Concurrency lease slots in the table: `<queue>` / `#slot#nnnn` (a flow key's: `#slot#k#<key>#nnnn`), taken and
given back with conditional writes."""

from __future__ import annotations

from hourglass.adapters.items import n, s
from hourglass.adapters.pacing_storage import KEY_IDLE_TTL_S
from hourglass.adapters.table import Table
from hourglass.core.concurrency import Lease, probe_order
from hourglass.core.keys import slot_key
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
    ) -> Lease | None:
        """One free slot of `limit` for `holder` until `until_ms`, or None when the probed ones are all held.
        `flow_key`: a slot of that key, which expires (TTL) once idle, so idle keys cost nothing."""
        values = {":me": s(holder), ":until": n(until_ms), ":now": n(now_ms)}
        update = "SET holder = :me, #until = :until"
        if flow_key is not None:
            update += ", expire_at = :ttl"
            values[":ttl"] = n(until_ms // 1000 + KEY_IDLE_TTL_S)
        for slot in probe_order(holder, limit, seed):
            try:
                self._conditional(
                    "update_item",
                    f"slot {slot} of {queue} is held",
                    TableName=self.table,
                    Key={"pk": s(queue), "sk": s(slot_key(slot, flow_key))},
                    UpdateExpression=update,
                    ConditionExpression="attribute_not_exists(#until) OR #until < :now",
                    ExpressionAttributeNames={"#until": "until"},
                    ExpressionAttributeValues=values,
                )
            except StaleVersionError:
                continue
            return Lease(slot, holder, until_ms, flow_key)
        return None

    def release_slot(self, queue: str, lease: Lease) -> None:
        """Frees the slot if `lease`'s holder still has it (a late release of an older holder is a no-op)."""
        try:
            self._conditional(
                "update_item",
                f"slot {lease.slot} of {queue} has another holder",
                TableName=self.table,
                Key={"pk": s(queue), "sk": s(slot_key(lease.slot, lease.flow_key))},
                UpdateExpression="SET #until = :zero",
                ConditionExpression="holder = :me",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":me": s(lease.holder), ":zero": n(0)},
            )
        except StaleVersionError:
            return
