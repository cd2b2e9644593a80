"""Attempt history: one record per delivery attempt and its document (its table key: `core.keys`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from hourglass.core.delivery import response_text
from hourglass.core.timestamps import format_rfc3339, from_ms, to_ms

MAX_ERROR = 500


class AttemptOutcome(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    FAILED = "failed"
    EXPIRED = "expired"


@dataclass(frozen=True)
class Attempt:
    message_id: str
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: AttemptOutcome
    status_code: int | None = None
    error: str | None = None
    retry_at: datetime | None = None
    # The first KiB of the target's response body (`core.delivery.response_text`).
    response: str | None = None

    def __post_init__(self) -> None:
        if self.attempt < 1:
            raise ValueError("attempt is 1-based")
        if (self.outcome is AttemptOutcome.RETRY) != (self.retry_at is not None):
            raise ValueError("retry_at is set exactly when the outcome is retry")
        if self.error is not None and len(self.error) > MAX_ERROR:
            object.__setattr__(self, "error", self.error[:MAX_ERROR])
        if self.response is not None:
            object.__setattr__(self, "response", response_text(self.response))


def attempt_doc(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt,
        "started_at": format_rfc3339(attempt.started_at),
        "finished_at": format_rfc3339(attempt.finished_at),
        "outcome": attempt.outcome.value,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "retry_at": None if attempt.retry_at is None else format_rfc3339(attempt.retry_at),
        "response_body": attempt.response,
    }


def history_doc(attempts: list[Attempt]) -> dict[str, Any]:
    """`GET .../attempts`: every recorded attempt, first to last."""
    return {"attempts": [attempt_doc(a) for a in sorted(attempts, key=lambda a: a.attempt)]}


def to_record(attempt: Attempt) -> dict[str, Any]:
    """The compact form a finished message keeps of its last attempt (times in epoch ms)."""
    record: dict[str, Any] = {
        "n": attempt.attempt,
        "s": to_ms(attempt.started_at),
        "f": to_ms(attempt.finished_at),
        "o": attempt.outcome.value,
    }
    optional = {"c": attempt.status_code, "e": attempt.error, "r": attempt.response}
    record.update({k: v for k, v in optional.items() if v is not None})
    return record


def from_record(message_id: str, record: dict[str, Any]) -> Attempt:
    return Attempt(
        message_id=message_id,
        attempt=int(record["n"]),
        started_at=from_ms(int(record["s"])),
        finished_at=from_ms(int(record["f"])),
        outcome=AttemptOutcome(record["o"]),
        status_code=record.get("c"),
        error=record.get("e"),
        response=record.get("r"),
    )


def merged(recorded: list[Attempt], final: Attempt | None) -> list[Attempt]:
    """A message's whole history: its history items, and the last attempt its outcome write carried."""
    by_number = {a.attempt: a for a in recorded}
    if final is not None:
        by_number[final.attempt] = final
    return [by_number[n] for n in sorted(by_number)]
