"""Signing-key rotation (contract v1.2): a receiver that knows only the old secret, then only the new one,
verifies every callback of the roll (signed with both secrets while `signing_secret_next` is set)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hourglass.adapters import http_target
from hourglass_client import verify

from tests.conftest import FakeClock
from tests.integration.conftest import Harness
from tests.loopback import CallbackReceiver, Received

RETRY = {"max_attempts": 3, "backoff_base": 1, "backoff_max": 1}


@pytest.fixture
def receiver(clock: FakeClock) -> Iterator[CallbackReceiver]:
    # `at` on the test's clock: the receiver checks the signature's age against the time it was sent.
    started = CallbackReceiver(clock=lambda: clock().timestamp()).start()
    yield started
    started.stop()


def put_queue(h: Harness, receiver: CallbackReceiver, **secrets: str) -> None:
    status, doc = h.call(
        "PUT", "/v1/queues/roll", {"target": {"type": "http", "url": receiver.url("/hook")}, "retry": RETRY, **secrets}
    )
    assert status in (200, 201), doc


def post(h: Harness, receiver: CallbackReceiver, path: str = "/hook") -> str:
    message = {"body": {"path": path}, "target": {"type": "http", "url": receiver.url(path)}}
    status, doc = h.call("POST", "/v1/queues/roll/messages", {"messages": [message]})
    assert status == 201, doc
    return str(doc["messages"][0]["id"])


def deliver(h: Harness) -> None:
    while timers := h.timers():
        h.dispatch(timers)


def check(received: list[Received], secret: str) -> list[bool]:
    return [verify(r.headers, r.raw, secret, now=r.at) for r in received]


def test_a_receiver_rolling_from_the_old_secret_to_the_new_verifies_every_callback(
    harness: Harness, receiver: CallbackReceiver
) -> None:
    harness.ctx.post = http_target.post
    verdicts: list[bool] = []

    def phase(secret: str) -> None:
        """Delivers what is due; the receiver checks each new callback with the one secret it knows now."""
        seen = len(receiver.received)
        deliver(harness)
        verdicts.extend(check(receiver.received[seen:], secret))

    put_queue(harness, receiver, signing_secret="old")
    post(harness, receiver)
    receiver.script["/retried"] = [503]  # its retry falls in the roll
    post(harness, receiver, "/retried")
    harness.dispatch(harness.timers())  # its retry waits in the timer queue
    verdicts.extend(check(receiver.received, "old"))
    # Step 1: the next secret is set; receivers still know only the old one.
    put_queue(harness, receiver, signing_secret="old", signing_secret_next="new")
    post(harness, receiver)
    phase("old")
    # Step 2: receivers are updated (now they know only the new secret); callbacks keep coming.
    post(harness, receiver)
    phase("new")
    # Step 3: the new secret becomes the only one.
    put_queue(harness, receiver, signing_secret="new")
    post(harness, receiver)
    phase("new")

    assert [r.answered for r in receiver.received].count(200) == 5
    assert len(verdicts) == 6 and all(verdicts)


def test_after_the_roll_the_old_secret_no_longer_verifies(harness: Harness, receiver: CallbackReceiver) -> None:
    harness.ctx.post = http_target.post
    put_queue(harness, receiver, signing_secret="old", signing_secret_next="new")
    put_queue(harness, receiver, signing_secret="new")
    post(harness, receiver)
    deliver(harness)
    assert check(receiver.received, "old") == [False]
