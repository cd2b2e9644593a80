"""Ordered queues (contract v1.3) through the SDK and the CLI against the local runtime: the `ordering` setting,
a key's state (head, waiting, held), its release, and `blocked_by`; paths checked on a scripted server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hourglass_client import AsyncClient, Client, KeyState, NotFound, ordering
from hourglass_client.queue_settings import parse_ordering

from tests.clients.conftest import API_KEY, RawReceiver, eventually, hold_a_key, scripted

# A key with a space, percent-encoded in the path; `test_a_key_with_a_slash_is_shown_and_released` has a "/".
KEY = "tenant 7"


def ordered_queue(client: Client, receiver: RawReceiver, on_failure: str | None = None) -> str:
    name = f"ord-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, ordering=ordering(on_failure))
    return name


# --- the setting ----------------------------------------------------------------------------------------


def test_the_ordering_builder_and_the_flag_spell_the_contracts_document() -> None:
    assert ordering() == {"by": "flow_key"}
    assert ordering("hold") == {"by": "flow_key", "on_failure": "hold"}
    assert parse_ordering("flow_key,continue") == {"by": "flow_key", "on_failure": "continue"}
    assert parse_ordering('{"by": "flow_key"}') == {"by": "flow_key"}
    with pytest.raises(ValueError, match="flow_key,hold"):
        parse_ordering("flow_key,hold,later")


def test_ordering_reads_back_with_its_default_on_failure(client: Client, receiver: RawReceiver) -> None:
    name = ordered_queue(client, receiver)
    assert client.get_queue(name).ordering == {"by": "flow_key", "on_failure": "continue"}


def test_a_put_without_ordering_removes_it(client: Client, receiver: RawReceiver) -> None:
    name = ordered_queue(client, receiver, "hold")
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")})
    assert client.get_queue(name).ordering is None


# --- keys -----------------------------------------------------------------------------------------------


def test_a_held_key_shows_its_failed_head_and_who_waits_behind_it(client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)
    assert client.key(held.queue, KEY) == KeyState(KEY, held.failed, 1, True, raw={})
    waiting = client.get_message(held.queue, held.waiting)
    assert (waiting.status, waiting.blocked_by) == ("pending", held.failed)


def test_releasing_a_held_key_lets_its_next_message_start(client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)
    released = client.release_key(held.queue, KEY)
    assert (released.flow_key, released.held) == (KEY, False)
    eventually(lambda: client.get_message(held.queue, held.waiting).status == "delivered")
    after = client.key(held.queue, KEY)
    assert (after.held, after.waiting) == (False, 0)
    assert client.get_message(held.queue, held.waiting).blocked_by is None


def test_a_key_with_a_slash_is_shown_and_released(client: Client, receiver: RawReceiver) -> None:
    # The contract's keys are any string: a "/" in one is percent-encoded, never a path separator.
    held = hold_a_key(client, receiver, "customer/42")
    assert client.key(held.queue, "customer/42").head == held.failed
    assert client.release_key(held.queue, "customer/42").held is False
    eventually(lambda: client.get_message(held.queue, held.waiting).status == "delivered")


def test_releasing_a_key_with_nothing_held_raises_not_found(client: Client, receiver: RawReceiver) -> None:
    name = ordered_queue(client, receiver, "hold")
    with pytest.raises(NotFound) as caught:
        client.release_key(name, "idle-key")
    assert caught.value.status == 404


def test_an_idle_key_has_no_head_and_nothing_waiting(client: Client, receiver: RawReceiver) -> None:
    name = ordered_queue(client, receiver)
    assert client.key(name, "never-used") == KeyState("never-used", None, 0, False, raw={})


def test_the_async_client_shows_and_releases_a_key(api_url: str, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)

    async def scenario() -> tuple[KeyState, KeyState]:
        async with AsyncClient(api_url, API_KEY) as hg:
            return await hg.key(held.queue, KEY), await hg.release_key(held.queue, KEY)

    before, after = asyncio.run(scenario())
    assert (before.held, before.head, after.held) == (True, held.failed, False)


def test_a_finished_message_says_when_it_finished(client: Client, queue: str) -> None:
    created = client.send(queue, "done")
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")
    got = client.get_message(queue, created.id)
    assert got.finished_at is not None and got.finished_at == got.delivered_at


def test_flow_keys_are_percent_encoded_whole_in_paths() -> None:
    answer = {"flow_key": "a/b c", "head": "m1", "waiting": 2, "held": True}
    fake = scripted((200, {}, answer), (200, {}, {**answer, "held": False}), (200, {}, {**answer, "flow_key": ""}))
    hg = Client(fake.url)
    assert hg.key("q", "a/b c") == KeyState("a/b c", "m1", 2, True, raw={})
    assert hg.release_key("q", "a/b c").held is False
    assert hg.key("q", "").flow_key == ""
    assert [(method, path) for method, path, _ in fake.requests] == [
        ("GET", "/v1/queues/q/keys/a%2Fb%20c"),
        ("POST", "/v1/queues/q/keys/a%2Fb%20c/release"),
        ("GET", "/v1/queues/q/keys/"),
    ]


# --- the CLI --------------------------------------------------------------------------------------------


def test_queues_put_sets_ordering_and_the_table_says_so(run: Any, receiver: RawReceiver) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    put = run("queues", "put", name, "--target-url", receiver.url("/cli"), "--ordering", "flow_key,hold")
    assert put.exit_code == 0, put.output
    assert "in due order, held on failure" in put.stdout
    doc = json.loads(run("--json", "queues", "get", name).stdout)
    assert doc["ordering"] == {"by": "flow_key", "on_failure": "hold"}


def test_a_bad_ordering_value_names_the_flag(run: Any) -> None:
    result = run("queues", "put", "cli-bad-ordering", "--ordering", "flow_key,hold,now")
    assert result.exit_code == 2 and "--ordering" in result.output


def test_keys_show_prints_head_waiting_and_held(run: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)
    shown = json.loads(run("--json", "keys", "show", held.queue, KEY).stdout)
    assert shown == {"flow_key": KEY, "head": held.failed, "waiting": 1, "held": True}
    table = run("keys", "show", held.queue, KEY).stdout
    assert f'"{KEY}"' in table and held.failed in table and "yes" in table


def test_keys_release_lets_the_next_message_start(run: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)
    result = run("keys", "release", held.queue, KEY)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f'released key "{KEY}" of {held.queue}'
    eventually(lambda: client.get_message(held.queue, held.waiting).status == "delivered")


def test_keys_release_of_a_key_not_held_exits_1_with_the_code(run: Any, client: Client, receiver: RawReceiver) -> None:
    name = ordered_queue(client, receiver, "hold")
    result = run("keys", "release", name, "idle-key")
    assert result.exit_code == 1 and "404 not_found" in result.output


def test_get_and_list_show_what_a_message_waits_behind(run: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, KEY)
    assert json.loads(run("--json", "get", held.queue, held.waiting).stdout)["blocked_by"] == held.failed
    listed = run("list", held.queue, "--status", "pending").stdout
    assert "blocked by" in listed and held.failed in listed
