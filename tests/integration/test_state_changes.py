"""Every path that ends or revives a message leaves the state its single-message endpoint leaves: retry budget,
attempt history TTL, failure notice, and redelivered occurrences (issue 23, rule 2)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hourglass.service.dead_letters import DeadLetters

from tests.integration.conftest import Harness
from tests.integration.test_delivery_control import run_until_quiet
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.integration.test_schedules import occurrences, put, run_until


def redeliver(h: Harness, message_id: str, how: str) -> None:
    if how == "single":
        status, _ = h.call("POST", f"/v1/queues/orders/messages/{message_id}/redeliver")
    else:
        status, _ = h.call("POST", "/v1/queues/orders/operations", {"action": "redeliver"})
    assert status in (200, 202)


def history_items(h: Harness, message_id: str) -> list[dict[str, Any]]:
    items = h.ddb.scan(TableName=h.ctx.settings.table)["Items"]
    return [i for i in items if i["sk"]["S"].startswith(f"a#{message_id}#")]


def message_item(h: Harness, message_id: str) -> dict[str, Any]:
    key = {"pk": {"S": "orders"}, "sk": {"S": f"m#{message_id}"}}
    return dict(h.ddb.get_item(TableName=h.ctx.settings.table, Key=key)["Item"])


def notified_queue(h: Harness, name: str) -> str:
    url = str(h.sqs.create_queue(QueueName=name)["QueueUrl"])
    make_queue(h, settings={**HTTP_QUEUE, "failure_destination": {"type": "sqs", "queue_url": url}})
    return url


@pytest.mark.parametrize("how", ["single", "bulk"])
def test_a_redelivered_message_gets_a_fresh_retry_budget_single_or_bulk(harness: Harness, how: str) -> None:
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 2}})
    harness.receiver.answers = [503, 503, 503, 200]
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    assert get(harness, created["id"])["status"] == "failed"
    redeliver(harness, created["id"], how)
    run_until_quiet(harness)
    final = get(harness, created["id"])
    assert (final["status"], final["attempts"]) == ("delivered", 4)


@pytest.mark.parametrize("how", ["single", "bulk"])
def test_a_redelivered_message_keeps_its_history_without_a_ttl(harness: Harness, how: str) -> None:
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 2}})
    harness.receiver.answers = [503, 503]
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    redeliver(harness, created["id"], how)
    kept = history_items(harness, created["id"])
    assert len(kept) == 2 and all("expire_at" not in i for i in kept)


def test_a_message_expired_at_admission_notifies_the_failure_destination(harness: Harness) -> None:
    url = notified_queue(harness, "target-admitted")
    [created] = post(harness, {"body": 1, "delay": 100, "ttl": 10})
    assert created["status"] == "expired"
    assert [(n["event"], n["id"]) for n in harness.target_messages(url)] == [("message.expired", created["id"])]


def test_a_message_expired_by_patch_notifies_the_failure_destination(harness: Harness) -> None:
    url = notified_queue(harness, "target-patched")
    [created] = post(harness, {"body": 1, "delay": 100, "ttl": 200})
    status, doc = harness.call("PATCH", f"/v1/queues/orders/messages/{created['id']}", {"delay": 300})
    assert (status, doc["status"]) == (200, "expired")
    assert [(n["event"], n["id"]) for n in harness.target_messages(url)] == [("message.expired", created["id"])]


def test_a_message_expired_by_patch_is_kept_only_for_the_retention(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 100, "ttl": 200})
    harness.call("PATCH", f"/v1/queues/orders/messages/{created['id']}", {"delay": 300})
    assert "expire_at" in message_item(harness, created["id"])


def test_a_message_expired_by_a_bulk_shift_notifies_the_failure_destination(harness: Harness) -> None:
    url = notified_queue(harness, "target-shifted")
    [created] = post(harness, {"body": 1, "delay": 100, "ttl": 200})
    status, _ = harness.call("POST", "/v1/queues/orders/operations", {"action": "shift", "seconds": 3600})
    assert (status, get(harness, created["id"])["status"]) == (202, "expired")
    assert [(n["event"], n["id"]) for n in harness.target_messages(url)] == [("message.expired", created["id"])]


def test_a_message_failed_by_the_dlq_consumer_gives_its_history_the_ttl(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503]
    [created] = post(harness, {"body": 1})
    harness.dispatch(harness.timers())  # attempt 1 fails: a history item, a retry timer
    [retry] = harness.timers()
    assert DeadLetters(harness.ctx).run_batch([("r1", retry["body"], 11)]) == []
    assert get(harness, created["id"])["status"] == "failed"
    kept = history_items(harness, created["id"])
    assert len(kept) == 1 and all("expire_at" in i for i in kept)


@pytest.mark.parametrize("change", ["delete", "pause", "replace"])
def test_a_redelivered_occurrence_is_delivered_whatever_its_schedule_became(harness: Harness, change: str) -> None:
    make_queue(harness)
    put(harness, "minutely", {"every": 60, "body": 1})
    run_until(harness, harness.clock.now + timedelta(seconds=65))
    first = occurrences(harness, "minutely", "delivered")[0]
    status, doc = harness.call("POST", f"/v1/queues/orders/messages/{first['id']}/redeliver")
    assert (status, doc["status"]) == (200, "pending")
    if change == "delete":
        harness.call("DELETE", "/v1/queues/orders/schedules/minutely")
    elif change == "pause":
        harness.call("POST", "/v1/queues/orders/schedules/minutely/pause")
    else:
        put(harness, "minutely", {"every": 120, "body": 2})
    run_until_quiet(harness)
    again = get(harness, first["id"])
    assert (again["status"], again["attempts"]) == ("delivered", 2)
