"""Delivery windows end to end: a message due before its queue's window opens arrives at the opening, not before
(real time, about a minute; runs as deployed too)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tests.e2e.conftest import Client, Receiver, Stack
from tests.e2e.test_delivery import assert_on_time, post


def _next_opening(lead: float) -> datetime:
    """The first whole minute at least `lead` seconds ahead: windows open on whole minutes."""
    soon = datetime.now(UTC) + timedelta(seconds=lead)
    return soon.replace(second=0, microsecond=0) + timedelta(minutes=1)


def test_a_message_due_before_the_window_opens_arrives_at_the_opening(
    api: Client, receiver: Receiver, stack: Stack
) -> None:
    opening = _next_opening(20)  # 20 to 80 s away
    closing = opening + timedelta(minutes=5)
    window = {"timezone": "UTC", "from": opening.strftime("%H:%M"), "to": closing.strftime("%H:%M")}
    name = f"win{uuid.uuid4().hex[:10]}"
    path = f"/{name}"
    settings = {"target": {"type": "http", "url": receiver.url(path)}, "window": window}
    status, doc = api.call("PUT", f"/v1/queues/{name}", settings)
    assert status == 201, doc
    (created,) = post(api, name, {"body": "at the opening", "delay": 2})
    status, shown = api.call("GET", f"/v1/queues/{name}/messages/{created['id']}")
    assert shown["next_attempt_at"] == opening.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    wait = (opening - datetime.now(UTC)).total_seconds() + stack.swept_timeout
    (got,) = receiver.wait_for(path, 1, timeout=wait)
    assert_on_time(stack, got.at, opening.timestamp())
