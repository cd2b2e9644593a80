"""Every field of a message in the contract is an argument of `message` and `send`, in both clients, from
one declaration (`hourglass_client.message_fields`), the same fields as the server's (`core.model`)."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

from hourglass.core import validation
from hourglass_client import AsyncClient, Client, message, window
from hourglass_client.message_fields import MessageFields, field_names

from tests.clients.conftest import RawReceiver


def test_the_declaration_holds_every_field_the_server_accepts() -> None:
    assert field_names() == validation.MESSAGE_FIELDS


def test_send_takes_exactly_the_arguments_of_message_in_both_clients() -> None:
    expected = list(inspect.signature(message).parameters)
    for client in (Client("http://127.0.0.1:9"), AsyncClient("http://127.0.0.1:9")):
        assert list(inspect.signature(client.send).parameters)[1:] == expected


def test_only_the_fields_given_are_sent() -> None:
    assert message({"n": 1}, priority=0, target={}) == {"body": {"n": 1}, "priority": 0}
    assert set(message(1, **{name: None for name in MessageFields.__dataclass_fields__})) == {"body"}


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
