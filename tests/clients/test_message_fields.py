"""Every field of a message or schedule in the contract is an argument of `message` and `send`, or of
`put_schedule`, in both clients, from one declaration (`hourglass_client.message_fields`) with the same fields
as the server's (`core.model`)."""

from __future__ import annotations

import inspect
import uuid
from dataclasses import fields
from typing import Any

from hourglass.core import model, validation
from hourglass_client import AsyncClient, Client, message, window
from hourglass_client.message_fields import Carried, MessageEntry, MessageFields, SchedulePut, names

from tests.clients.conftest import RawReceiver


def test_the_declarations_hold_every_field_the_server_accepts() -> None:
    assert names(MessageEntry) == validation.MESSAGE_FIELDS
    assert names(SchedulePut) == validation.SCHEDULE_FIELDS
    assert names(Carried) == {f.name for f in fields(model.Carried)}


def test_send_and_put_schedule_take_exactly_their_declared_arguments_in_both_clients() -> None:
    expected = list(inspect.signature(message).parameters)
    for client in (Client("http://127.0.0.1:9"), AsyncClient("http://127.0.0.1:9")):
        assert list(inspect.signature(client.send).parameters)[1:] == expected
        assert set(list(inspect.signature(client.put_schedule).parameters)[2:]) == names(SchedulePut)


def test_only_the_fields_given_are_sent() -> None:
    assert message({"n": 1}, priority=0, target={}) == {"body": {"n": 1}, "priority": 0}
    assert set(message(1, **{f.name: None for f in fields(MessageFields)})) == {"body"}


def test_every_field_round_trips_through_send(client: Client, receiver: RawReceiver) -> None:
    name = f"mf-{uuid.uuid4().hex[:8]}"
    client.put_queue(name)
    given: dict[str, Any] = {
        "deliver_at": "2027-01-05T09:30:00",
        "timezone": "Europe/Paris",
        "ttl": 86400 * 90,
        "dedup_id": "every-field",
        "target": {"type": "http", "url": receiver.url("/fields")},
        "flow_key": "tenant-7",
        "priority": 8,
        "window": window("09:00", "18:00", timezone="Europe/Paris"),
    }
    created = client.send(name, {"n": 1}, **given)
    got = client.get_message(name, created.id)
    assert got.raw["due_at"] == "2027-01-05T08:30:00.000Z"
    assert (got.dedup_id, got.flow_key, got.priority) == ("every-field", "tenant-7", 8)
    assert got.raw["target"]["url"] == given["target"]["url"]
    assert got.window is not None and (got.window["timezone"], got.window["from"]) == ("Europe/Paris", "09:00")
    assert got.expires_at is not None


def test_a_schedule_gives_its_occurrences_what_they_carry(client: Client, receiver: RawReceiver) -> None:
    name = f"mf-{uuid.uuid4().hex[:8]}"
    client.put_queue(name)
    target = {"type": "http", "url": receiver.url("/occurrences")}
    made = client.put_schedule(name, "hourly", every=3600, body={"n": 1}, target=target, flow_key="t-1", priority=9)
    occurrence = client.list_messages(name, schedule="hourly").items[0]
    for read in (made, occurrence):
        assert (read.flow_key, read.priority, read.raw["target"]["url"]) == ("t-1", 9, target["url"])
