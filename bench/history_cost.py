"""Write units the attempt history adds per attempt, priced by DynamoDB's rules on the real items.

The items and updates are the ones `adapters.attempt_storage` writes (one history item per attempt the
message outlives; when a message with retries finishes, those get its TTL) and the outcome write of the
message item, which carries the attempt that ended it: all fed to `CapacityMeter`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass import contract
from hourglass.adapters.attempt_storage import attempt_to_item
from hourglass.adapters.items import item_size, message_to_item
from hourglass.core.attempts import MAX_ERROR, Attempt, AttemptOutcome
from hourglass.core.model import Message, Status

from bench.capacity_units import CapacityMeter, Index
from bench.report import Section

T0 = datetime(2030, 1, 1, tzinfo=UTC)
QUEUE = "orders-queue-name"
MESSAGE_ID = "0123456789abcdef0123456789abcdef"
DUE_INDEX = Index("due", "sweep_pk", "sweep_sk", ("version",))
RETENTION = timedelta(days=7)


def _attempts(count: int, error: str) -> list[Attempt]:
    out = []
    for n in range(1, count + 1):
        start = T0 + timedelta(seconds=10 * n)
        last = n == count
        out.append(
            Attempt(
                MESSAGE_ID,
                n,
                start,
                start + timedelta(milliseconds=180),
                AttemptOutcome.DELIVERED if last else AttemptOutcome.RETRY,
                status_code=200 if last else 503,
                error=None if last else error,
                retry_at=None if last else start + timedelta(seconds=5),
            )
        )
    return out


def _outcome_units(final: Attempt | None, body_bytes: int) -> float:
    """Write units of the delivered message's outcome write (the item before it is the same size)."""
    message = Message(
        id=MESSAGE_ID,
        queue=QUEUE,
        body="x" * body_bytes,
        status=Status.DELIVERED,
        created_at=T0,
        due_at=T0,
        version=3,
        attempts=final.attempt if final else 1,
        delivered_at=T0,
        final_attempt=final,
    )
    meter = CapacityMeter("messages", [DUE_INDEX])
    meter("put_item", {"Item": message_to_item(message)})
    return sum(u.write for u in meter.by_key.values()) + sum(u.write for u in meter.by_use.values())


def history_units(count: int, error: str = "HTTP 503", body_bytes: int = 100) -> tuple[float, int]:
    """(write units, largest item bytes) the history adds to a message (`body_bytes` inline) delivered at
    attempt `count`: the earlier attempts' items and TTL updates, and what the last one adds to the outcome write."""
    meter = CapacityMeter("messages", [DUE_INDEX])
    attempts = _attempts(count, error)
    finished = attempts[-1].finished_at
    for attempt in attempts[:-1]:
        meter("put_item", {"Item": attempt_to_item(QUEUE, attempt)})
    if count > 1:
        ttl = {"N": str(int((finished + RETENTION).timestamp()))}
        for attempt in attempts[:-1]:
            key = attempt_to_item(QUEUE, attempt)
            meter(
                "update_item",
                {
                    "Key": {"pk": key["pk"], "sk": key["sk"]},
                    "UpdateExpression": "SET #ttl = :t",
                    "ExpressionAttributeNames": {"#ttl": contract.TTL_ATTRIBUTE},
                    "ExpressionAttributeValues": {":t": ttl},
                },
            )
    assert not meter.errors, meter.errors
    units = sum(u.write for u in meter.by_key.values()) + sum(u.write for u in meter.by_use.values())
    units += _outcome_units(attempts[-1], body_bytes) - _outcome_units(None, body_bytes)
    largest = max(item_size(attempt_to_item(QUEUE, a, finished)) for a in attempts)
    return units, largest


def section() -> Section:
    out = Section("history_cost", "Attempt history: extra write units per attempt")
    rows = []
    for count in (1, 2, 5):
        units, largest = history_units(count)
        rows.append([str(count), f"{units:g}", f"{units / count:.2f}", str(largest)])
        if count == 1:
            name = "extra write units, message (100 B body) delivered at its first attempt"
            out.check(name, units, "WU", budget="0", passed=units == 0)
    _, worst_size = history_units(2, "x" * MAX_ERROR)
    out.check("largest history item (500-char error)", worst_size, "bytes", budget="< 1024", passed=worst_size < 1024)
    out.data["table"] = {"header": ["attempts", "history WU", "WU per attempt", "largest item (B)"], "rows": rows}
    out.notes.append(
        "The attempt that ends a message rides on its outcome write (no write of its own unless it pushes the "
        "message item over a kilobyte); each earlier attempt is one put before the outcome write, and gets the "
        "message's TTL when it finishes (one update each): 2(k - 1) write units for a message finished at "
        f"attempt k, none for a first-time delivery. A 500-char error gives a {worst_size} B item, one write unit."
    )
    return out


def main() -> int:
    print(section().markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
