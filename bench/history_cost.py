"""Write units the attempt history adds per attempt, priced by DynamoDB's rules on the real items.

The items and updates are the ones `adapters.control_storage` writes (one history item per attempt;
when a message with retries finishes, its earlier attempts get its TTL), fed to `CapacityMeter`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass import contract
from hourglass.adapters.control_storage import attempt_to_item
from hourglass.adapters.items import item_size
from hourglass.core.attempts import MAX_ERROR, Attempt, AttemptOutcome

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


def history_units(count: int, error: str = "HTTP 503") -> tuple[float, int]:
    """(write units, largest item bytes) of the history of a message delivered at attempt `count`."""
    meter = CapacityMeter("messages", [DUE_INDEX])
    attempts = _attempts(count, error)
    finished = attempts[-1].finished_at
    for attempt in attempts:
        expire = finished + RETENTION if attempt is attempts[-1] else None
        meter("put_item", {"Item": attempt_to_item(QUEUE, attempt, expire)})
    if count > 1:
        ttl = {"N": str(int((finished + RETENTION).timestamp()))}
        for attempt in attempts[:-1]:  # the last one was written with the TTL
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
    largest = max(item_size(attempt_to_item(QUEUE, a, finished)) for a in attempts)
    return units, largest


def section() -> Section:
    out = Section("history_cost", "Attempt history: extra write units per attempt")
    rows = []
    for count in (1, 2, 5):
        units, largest = history_units(count)
        rows.append([str(count), f"{units:g}", f"{units / count:.2f}", str(largest)])
        if count == 1:
            name = "extra write units, message delivered at its first attempt"
            out.check(name, units, "WU", budget="1", passed=units <= 1)
    _, worst_size = history_units(2, "x" * MAX_ERROR)
    out.check("largest history item (500-char error)", worst_size, "bytes", budget="< 1024", passed=worst_size < 1024)
    out.data["table"] = {"header": ["attempts", "history WU", "WU per attempt", "largest item (B)"], "rows": rows}
    out.notes.append(
        "One put per attempt (before the outcome write); when a message that needed retries finishes, each "
        "earlier history item gets the message's TTL (one update each): (2k - 1) write units for a message "
        f"finished at attempt k, exactly 1 for a first-time delivery. A 500-char error gives {worst_size} B, "
        "still one write unit."
    )
    return out


def main() -> int:
    print(section().markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
