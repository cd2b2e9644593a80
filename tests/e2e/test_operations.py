"""Bulk operations through the local runtime: a cancel racing deliveries never delivers what it cancelled."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.e2e.conftest import Client, Receiver


def test_bulk_cancel_racing_deliveries_never_delivers_a_message_it_cancelled(api: Client, receiver: Receiver) -> None:
    queue = f"race-{uuid.uuid4().hex[:8]}"
    path = f"/{queue}"
    assert api.call("PUT", f"/v1/queues/{queue}", {"target": {"type": "http", "url": receiver.url(path)}})[0] == 201
    ids: list[str] = []
    for first in range(0, 200, 100):
        batch = [{"body": {"n": first + i}, "delay": 1 + (first + i) % 5} for i in range(100)]
        status, doc = api.call("POST", f"/v1/queues/{queue}/messages", {"messages": batch})
        assert status == 201
        ids += [m["id"] for m in doc["messages"]]
    time.sleep(1.5)  # let the first ones fall due, so the operation races the dispatcher
    status, started = api.call("POST", f"/v1/queues/{queue}/operations", {"action": "cancel"})
    assert status == 202
    done: dict[str, Any] = started
    deadline = time.monotonic() + 60
    while done["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        done = api.call("GET", f"/v1/queues/{queue}/operations/{started['id']}")[1]
    time.sleep(8)  # every timer of the queue has come due by now
    statuses = {i: api.call("GET", f"/v1/queues/{queue}/messages/{i}")[1]["status"] for i in ids}
    delivered_ids = {r.headers.get("Hourglass-Message-Id") for r in receiver.received if r.path == path}
    cancelled = {i for i, s in statuses.items() if s == "cancelled"}
    assert done["status"] == "succeeded"
    assert done["applied"] == len(cancelled) > 0
    assert not cancelled & delivered_ids
    assert {i for i, s in statuses.items() if s == "delivered"} == delivered_ids
