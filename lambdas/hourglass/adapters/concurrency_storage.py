"""Concurrency lease slots in the table: `<queue>` / `#slot#nnnn`, taken and given back with conditional writes."""

from __future__ import annotations

from hourglass.adapters.items import n, s
from hourglass.adapters.table import Table
from hourglass.core.concurrency import Lease, probe_order
from hourglass.core.keys import slot_key
from hourglass.errors import StaleVersionError


class ConcurrencyStorage(Table):
    def acquire_slot(
        self, queue: str, limit: int, holder: str, until_ms: int, now_ms: int, seed: int = 0
    ) -> Lease | None:
        """One free slot of `limit` for `holder` until `until_ms`, or None when the probed ones are all held."""
        for slot in probe_order(holder, limit, seed):
            try:
                self._conditional(
                    "update_item",
                    f"slot {slot} of {queue} is held",
                    TableName=self.table,
                    Key={"pk": s(queue), "sk": s(slot_key(slot))},
                    UpdateExpression="SET holder = :me, #until = :until",
                    ConditionExpression="attribute_not_exists(#until) OR #until < :now",
                    ExpressionAttributeNames={"#until": "until"},
                    ExpressionAttributeValues={":me": s(holder), ":until": n(until_ms), ":now": n(now_ms)},
                )
            except StaleVersionError:
                continue
            return Lease(slot, holder, until_ms)
        return None

    def release_slot(self, queue: str, lease: Lease) -> None:
        """Frees the slot if `lease`'s holder still has it (a late release of an older holder is a no-op)."""
        try:
            self._conditional(
                "update_item",
                f"slot {lease.slot} of {queue} has another holder",
                TableName=self.table,
                Key={"pk": s(queue), "sk": s(slot_key(lease.slot))},
                UpdateExpression="SET #until = :zero",
                ConditionExpression="holder = :me",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":me": s(lease.holder), ":zero": n(0)},
            )
        except StaleVersionError:
            return
