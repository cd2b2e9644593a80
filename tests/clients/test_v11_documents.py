"""v1.1 calls against a scripted loopback server answering with the contract's documents: what the
runtime cannot be made to answer on cue (a running operation's polls, cursors, path encoding)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from hourglass_client import AsyncClient, Client

from tests.clients.conftest import scripted

T0 = "2026-11-21T10:00:00.000Z"


def operation(status: str, applied: int) -> dict[str, object]:
    return {
        "id": "op1", "action": "cancel", "filter": {"status": "pending"}, "status": status, "matched": 3,
        "applied": applied, "skipped": 0, "created_at": T0, "finished_at": None if status == "running" else T0,
    }  # fmt: skip


def test_wait_operation_polls_until_it_is_no_longer_running() -> None:
    fake = scripted(
        (200, {}, operation("running", 1)), (200, {}, operation("running", 2)), (200, {}, operation("succeeded", 3))
    )
    sleeps: list[float] = []
    done = Client(fake.url, sleep=sleeps.append).wait_operation("q", "op1", poll=0.5)
    assert (done.status, done.applied, done.done) == ("succeeded", 3, True)
    assert sleeps == [0.5, 0.5]
    assert [path for _, path, _ in fake.requests] == ["/v1/queues/q/operations/op1"] * 3


def test_attempts_parse_times_outcomes_and_codes() -> None:
    history = {
        "attempts": [
            {
                "attempt": 1,
                "started_at": T0,
                "finished_at": T0,
                "outcome": "retry",
                "status_code": 503,
                "error": "HTTP 503",
                "retry_at": T0,
            },
            {
                "attempt": 2,
                "started_at": T0,
                "finished_at": T0,
                "outcome": "delivered",
                "status_code": None,
                "error": None,
                "retry_at": None,
            },
        ]
    }
    found = Client(scripted((200, {}, history)).url).attempts("q", "m1")
    assert [(a.attempt, a.outcome, a.status_code, a.retry_at) for a in found] == [
        (1, "retry", 503, datetime(2026, 11, 21, 10, tzinfo=UTC)),
        (2, "delivered", None, None),
    ]


def attempt(number: int) -> dict[str, object]:
    return {"attempt": number, "started_at": T0, "finished_at": T0, "outcome": "retry", "status_code": 503}


def history_in_two_pages() -> Any:
    """A history too long for one response: the latest attempts, then (cursor 3) the ones before them."""
    return scripted(
        (200, {}, {"attempts": [attempt(3), attempt(4)], "next_cursor": "3"}),
        (200, {}, {"attempts": [attempt(1), attempt(2)], "next_cursor": None}),
    )


def test_attempts_follows_the_cursor_to_every_earlier_page_in_attempt_order() -> None:
    fake = history_in_two_pages()
    found = Client(fake.url).attempts("q", "m1")
    assert ([a.attempt for a in found], fake.requests[1][1]) == (
        [1, 2, 3, 4],
        "/v1/queues/q/messages/m1/attempts?cursor=3",
    )


def test_iter_attempts_gives_the_newest_first() -> None:
    found = Client(history_in_two_pages().url).iter_attempts("q", "m1")
    assert [a.attempt for a in found] == [4, 3, 2, 1]


def test_the_async_client_reads_every_page_of_attempts_too() -> None:
    found = asyncio.run(AsyncClient(history_in_two_pages().url).attempts("q", "m1"))
    assert [a.attempt for a in found] == [1, 2, 3, 4]


def test_iter_schedules_follows_next_cursor() -> None:
    def schedule(name: str) -> dict[str, object]:
        return {"name": name, "queue": "q", "every": 3600, "timezone": "UTC", "paused": False, "next_due_at": [T0] * 3}

    fake = scripted(
        (200, {}, {"schedules": [schedule("a"), schedule("b")], "next_cursor": "c1"}),
        (200, {}, {"schedules": [schedule("c")], "next_cursor": None}),
    )
    found = list(Client(fake.url).iter_schedules("q", page_size=2))
    assert [s.name for s in found] == ["a", "b", "c"]
    assert all(len(s.next_due_at) == 3 for s in found)
    assert fake.requests[1][1] == "/v1/queues/q/schedules?limit=2&cursor=c1"


def test_names_and_ids_are_percent_encoded_in_paths() -> None:
    fake = scripted((200, {}, {"name": "a b", "paused": True}))
    assert Client(fake.url).pause_queue("a b").paused is True
    assert fake.requests[0][:2] == ("POST", "/v1/queues/a%20b/pause")
