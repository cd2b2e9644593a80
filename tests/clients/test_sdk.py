"""The SDK against the local runtime: v1 and v1.1 endpoints."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.version import __version__
from hourglass_client import BadRequest, Client, Conflict, NotFound, Unauthorized, message, targets, verify

from tests.clients.conftest import API_KEY, RawReceiver, eventually


def test_the_client_reads_the_servers_version(client: Client) -> None:
    assert (client.health(), client.server_version()) == ({"status": "ok", "version": __version__}, __version__)


def test_put_queue_creates_a_queue_that_get_returns(client: Client) -> None:
    name = f"q-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, default_delay=5, ttl=60, retry={"max_attempts": 3})
    got = client.get_queue(name)
    assert (got.name, got.default_delay, got.ttl, got.retry["max_attempts"]) == (name, 5, 60, 3)


def test_unknown_queue_raises_not_found_with_the_contract_code(client: Client) -> None:
    with pytest.raises(NotFound) as caught:
        client.get_queue("no-such-queue-here")
    assert (caught.value.status, caught.value.code) == (404, "not_found")


def test_bad_input_raises_bad_request_naming_the_field(client: Client, queue: str) -> None:
    with pytest.raises(BadRequest) as caught:
        client.send(queue, {"a": 1}, delay=-5)
    assert caught.value.status == 400
    assert "delay" in caught.value.message
    assert list(client.iter_messages(queue)) == []


def test_a_wrong_api_key_raises_unauthorized(api_url: str) -> None:
    with pytest.raises(Unauthorized) as caught:
        Client(api_url, "not-the-key").get_queue("anything")
    assert caught.value.code == "forbidden"


def test_send_gives_each_message_a_dedup_id(client: Client, queue: str) -> None:
    created = client.send(queue, {"n": 1}, delay=600)
    stored = client.get_message(queue, created.id)
    assert stored.dedup_id is not None and stored.dedup_id.startswith("sdk-")
    assert (stored.status, stored.body) == ("pending", {"n": 1})


def test_sending_a_dedup_id_again_returns_the_first_message(client: Client, queue: str) -> None:
    first = client.send(queue, "x", delay=600, dedup_id="order-42")
    again = client.send(queue, "y", delay=600, dedup_id="order-42")
    assert (again.id, again.duplicate) == (first.id, True)
    assert client.get_message(queue, first.id).body == "x"


def test_send_batch_stores_more_than_one_request_holds_in_order(client: Client, queue: str) -> None:
    created = client.send_batch(queue, [message({"n": n}, delay=600) for n in range(230)])
    bodies = [client.get_message(queue, c.id).body for c in (created[0], created[99], created[100], created[229])]
    assert len({c.id for c in created}) == 230
    assert bodies == [{"n": 0}, {"n": 99}, {"n": 100}, {"n": 229}]


def test_iter_messages_follows_next_cursor_to_the_end(client: Client, queue: str) -> None:
    created = client.send_batch(queue, [message(n, delay=600) for n in range(23)])
    listed = list(client.iter_messages(queue, status="pending", page_size=5))
    assert sorted(m.id for m in listed) == sorted(c.id for c in created)


def test_cancel_makes_a_pending_message_cancelled(client: Client, queue: str) -> None:
    created = client.send(queue, "bye", delay=600)
    client.cancel(queue, created.id)
    client.cancel(queue, created.id)  # already cancelled: no error
    assert client.get_message(queue, created.id).status == "cancelled"


def test_patch_reschedules_and_edits_a_pending_message(client: Client, queue: str) -> None:
    created = client.send(queue, "old", delay=600)
    when = datetime.now(UTC) + timedelta(hours=2)
    patched = client.patch(queue, created.id, body={"new": True}, deliver_at=when)
    assert patched.body == {"new": True}
    assert patched.due_at is not None and abs((patched.due_at - when).total_seconds()) < 0.01


def test_delivered_message_is_signed_so_verify_accepts_it(client: Client, receiver: RawReceiver) -> None:
    name = f"q-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, signing_secret="s3cret")
    created = client.send(name, {"order": 7})
    delivery = receiver.wait_for(f"/{name}")[0]
    assert delivery.headers["Hourglass-Message-Id"] == created.id
    assert verify(delivery.headers, delivery.raw, "s3cret")
    assert not verify(delivery.headers, delivery.raw + b" ", "s3cret")
    assert not verify(delivery.headers, delivery.raw, "other-secret")


def test_a_delivered_message_cannot_be_cancelled(client: Client, queue: str, receiver: RawReceiver) -> None:
    created = client.send(queue, "now")
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")
    with pytest.raises(Conflict) as caught:
        client.cancel(queue, created.id)
    assert (caught.value.status, caught.value.code) == (409, "conflict")


def test_delete_queue_then_get_is_not_found(client: Client, queue: str) -> None:
    client.delete_queue(queue)
    with pytest.raises(NotFound):
        client.get_queue(queue)


def test_later_endpoints_create_query_and_delete(client: Client, receiver: RawReceiver) -> None:
    message_id = client.later_create(
        topic="order", delay=600, callback=receiver.url("/later"), content="hello", retry=2
    )
    assert client.later_query(message_id)["content"] == "hello"
    client.later_delete(message_id)
    with pytest.raises(NotFound):
        client.later_delete("0" * 26)


# --- v1.1 ------------------------------------------------------------------------------------


def test_pause_and_resume_set_the_queue_paused_flag(client: Client, queue: str) -> None:
    assert client.pause_queue(queue).paused is True
    assert client.get_queue(queue).paused is True
    assert client.resume_queue(queue).paused is False


def test_attempts_list_a_retry_then_the_delivery(client: Client, queue: str, receiver: RawReceiver) -> None:
    receiver.script[f"/{queue}"] = [503]
    created = client.send(queue, "flaky")
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")
    found = client.attempts(queue, created.id)
    assert [(a.attempt, a.outcome, a.status_code) for a in found] == [(1, "retry", 503), (2, "delivered", 200)]


def test_redeliver_makes_a_failed_message_pending_again(client: Client, queue: str, receiver: RawReceiver) -> None:
    receiver.script[f"/{queue}"] = [400, 200]
    created = client.send(queue, "fails once")
    eventually(lambda: client.get_message(queue, created.id).status == "failed")
    client.redeliver(queue, created.id)
    delivered = eventually(lambda: (m := client.get_message(queue, created.id)).status == "delivered" and m)
    assert delivered.attempts == 2


def test_cancel_operation_cancels_the_pending_messages(client: Client, queue: str) -> None:
    created = client.send_batch(queue, [message(n, delay=600) for n in range(12)])
    started = client.start_operation(queue, "cancel", filter={"status": "pending"})
    done = client.wait_operation(queue, started.id, poll=0.2, timeout=30)
    assert (done.status, done.applied) == ("succeeded", 12)
    assert {client.get_message(queue, c.id).status for c in created} == {"cancelled"}


def test_schedule_put_get_list_pause_delete(client: Client, queue: str) -> None:
    made = client.put_schedule(queue, "daily", cron="0 9 * * MON-FRI", timezone="Europe/London", body={"r": 1})
    assert len(made.next_due_at) == 3
    assert [s.name for s in client.iter_schedules(queue)] == ["daily"]
    assert client.pause_schedule(queue, "daily").paused is True
    client.delete_schedule(queue, "daily")
    with pytest.raises(NotFound):
        client.get_schedule(queue, "daily")


def test_iter_queues_pages_through_every_queue_in_name_order(client: Client, queue: str) -> None:
    client.pause_queue(queue)
    found = list(client.iter_queues(page_size=2))
    names = [q.name for q in found]
    assert names == sorted(set(names)) and queue in names
    assert [q.paused for q in found if q.name == queue] == [True]


def test_a_deleted_queue_is_no_longer_listed(client: Client, queue: str) -> None:
    client.delete_queue(queue)
    assert queue not in [q.name for q in client.iter_queues()]


def test_message_documents_keep_the_raw_json(client: Client, queue: str) -> None:
    created = client.send(queue, [1, 2], delay=600)
    raw = client.get_message(queue, created.id).raw
    assert json.loads(json.dumps(raw))["body"] == [1, 2]


def test_send_batch_splits_requests_by_size(client: Client, queue: str) -> None:
    # 60 bodies of 110 KB: fewer than 100, but 6.6 MB in one request, over what the API accepts.
    pad = "x" * 110_000
    created = client.send_batch(queue, [message({"n": n, "pad": pad}, delay=600) for n in range(60)])
    stored = client.get_message(queue, created[59].id)
    assert (len({c.id for c in created}), stored.body["n"]) == (60, 59)


def test_a_target_builder_gives_the_queue_its_aws_target(client: Client) -> None:
    name = f"sdk-{uuid.uuid4().hex[:8]}"
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:target-sdk"
    client.put_queue(name, target=targets.state_machine(machine))
    assert client.get_queue(name).target == {"type": "stepfunctions", "state_machine_arn": machine}


# --- v1.2 ------------------------------------------------------------------------------------


def test_order_due_counts_and_deliver_now(client: Client, queue: str) -> None:
    late = client.send(queue, "late", delay=900)
    early = client.send(queue, "early", delay=600)
    assert [m.id for m in client.iter_messages(queue, order="due")] == [early.id, late.id]
    assert client.get_queue(queue).counts["pending"] == 2
    moved = client.deliver_now(queue, late.id)
    assert moved.due_at is not None and late.due_at is not None and moved.due_at < late.due_at


def test_with_closes_the_client(api_url: str, queue: str) -> None:
    with Client(api_url, API_KEY) as hg:
        assert hg.get_queue(queue).name == queue
    with pytest.raises(RuntimeError, match="closed"):
        hg.get_queue(queue)
