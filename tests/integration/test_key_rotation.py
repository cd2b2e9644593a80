"""Signing-key rotation (contract v1.2): a receiver that knows only the old secret, then only the new one,
verifies every callback of the roll (signed with both secrets while `signing_secret_next` is set)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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


# What a PUT leaves of the secrets (docs/authentication.md): they are never returned, so a body that names
# neither keeps them; `signing_secret` sets the pair; `signing_secret_next` alone keeps the current secret.
def secrets_after(h: Harness, *bodies: dict[str, Any]) -> tuple[str, ...]:
    for body in bodies:
        status, doc = h.call("PUT", "/v1/queues/kept", {"retry": RETRY, **body})
        assert status in (200, 201), doc
    stored = h.ctx.store.get_queue("kept", consistent=True)
    assert stored is not None
    return stored.settings.signing_secrets


def test_a_put_without_the_secrets_keeps_them(harness: Harness) -> None:
    rolling = {"signing_secret": "old", "signing_secret_next": "new"}
    assert secrets_after(harness, rolling, {"max_delay": 60}) == ("old", "new")


def test_a_put_with_a_null_secret_removes_both(harness: Harness) -> None:
    rolling = {"signing_secret": "old", "signing_secret_next": "new"}
    assert secrets_after(harness, rolling, {"signing_secret": None}) == ()


def test_a_put_of_the_next_secret_alone_keeps_the_current_one(harness: Harness) -> None:
    assert secrets_after(harness, {"signing_secret": "old"}, {"signing_secret_next": "new"}) == ("old", "new")


def test_a_put_of_a_null_next_secret_ends_the_rotation_keeping_the_current_one(harness: Harness) -> None:
    rolling = {"signing_secret": "old", "signing_secret_next": "new"}
    assert secrets_after(harness, rolling, {"signing_secret_next": None}) == ("old",)


def test_promoting_the_next_secret_without_naming_the_next_ends_the_rotation(harness: Harness) -> None:
    rolling = {"signing_secret": "old", "signing_secret_next": "new"}
    assert secrets_after(harness, rolling, {"signing_secret": "new"}) == ("new",)


def test_a_next_secret_on_a_queue_without_a_secret_is_refused_and_changes_nothing(harness: Harness) -> None:
    assert secrets_after(harness, {"max_delay": 60}) == ()
    status, doc = harness.call("PUT", "/v1/queues/kept", {"max_delay": 30, "signing_secret_next": "new"})
    stored = harness.ctx.store.get_queue("kept", consistent=True)
    assert stored is not None
    named = doc["error"]["message"].split(":")[0]
    assert (status, named, stored.settings.max_delay) == (400, "signing_secret_next", 60)
