"""Delivery control through the API, the dispatcher and mock_aws with a fixed clock (contract v1.1)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.metric_history import MinuteHistory
from hourglass.core import failure_notice
from hourglass.core.timestamps import parse_rfc3339
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import failure_notices
from hourglass.service.dead_letters import DeadLetters

from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.unit.test_limits import FINAL


def attempts(h: Harness, message_id: str, queue: str = "orders") -> list[dict[str, Any]]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/messages/{message_id}/attempts")
    assert status == 200, doc
    return list(doc["attempts"])


def run_until_quiet(h: Harness, rounds: int = 10) -> None:
    for _ in range(rounds):
        timers = h.timers()
        if not timers:
            return
        h.dispatch(timers)


# queue settings ------------------------------------------------------------------------------
def test_queue_returns_its_control_fields(harness: Harness) -> None:
    destination = {"type": "http", "url": "http://127.0.0.1:9/failed", "headers": {"x-k": "v"}}
    settings = {**HTTP_QUEUE, "rate_limit": 20, "max_concurrency": 5, "timeout": 30, "failure_destination": destination}
    make_queue(harness, settings=settings)
    _, doc = harness.call("GET", "/v1/queues/orders")
    got = {k: doc[k] for k in ("rate_limit", "max_concurrency", "timeout", "failure_destination", "paused")}
    assert got == {
        **{k: settings[k] for k in ("rate_limit", "max_concurrency", "timeout")},
        "paused": False,
        "failure_destination": destination,
    }


def test_queue_control_defaults(harness: Harness) -> None:
    make_queue(harness)
    _, doc = harness.call("GET", "/v1/queues/orders")
    got = {k: doc[k] for k in ("rate_limit", "max_concurrency", "timeout", "failure_destination", "paused")}
    assert got == {
        "rate_limit": None,
        "max_concurrency": None,
        "timeout": 15,
        "failure_destination": None,
        "paused": False,
    }


def test_out_of_range_timeout_is_a_400_naming_it_and_changes_nothing(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "timeout": 121})
    _, queue = harness.call("GET", "/v1/queues/orders")
    assert (status, "timeout" in doc["error"]["message"], queue["timeout"]) == (400, True, 15)


def test_put_leaves_the_paused_state_as_it_is(harness: Harness) -> None:
    make_queue(harness)
    harness.call("POST", "/v1/queues/orders/pause")
    status, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "paused": False, "timeout": 20})
    assert (status, doc["paused"], doc["timeout"]) == (200, True, 20)


def test_a_stored_queue_beyond_todays_bounds_still_reads_and_delivers(harness: Harness) -> None:
    # As if the bounds were tightened after the queue was stored: its item keeps values PUT now refuses.
    make_queue(harness, settings={**HTTP_QUEUE, "rate_limit": 20, "max_concurrency": 5})
    key = {"pk": {"S": "orders"}, "sk": {"S": "#queue"}}
    item = harness.ddb.get_item(TableName=harness.ctx.settings.table, Key=key)["Item"]
    settings = json.loads(item["settings"]["S"])
    settings["control"].update(rate_limit=50_000, max_concurrency=5_000)
    item["settings"] = {"S": json.dumps(settings)}
    harness.ddb.put_item(TableName=harness.ctx.settings.table, Item=item)
    status, queue = harness.call("GET", "/v1/queues/orders")
    [created] = post(harness, {"body": "old queue", "delay": 5})
    run_until_quiet(harness)
    got = (status, queue["rate_limit"], queue["max_concurrency"], get(harness, created["id"])["status"])
    assert got == (200, 50_000, 5_000, "delivered")


# pause / resume ------------------------------------------------------------------------------
def test_pause_answers_with_the_paused_queue(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/pause")
    assert (status, doc["name"], doc["paused"]) == (200, "orders", True)


def test_pause_of_an_unknown_queue_is_a_404(harness: Harness) -> None:
    status, _ = harness.call("POST", "/v1/queues/nope/pause")
    assert status == 404


def test_paused_queue_starts_no_attempt_and_keeps_the_message_pending(harness: Harness) -> None:
    make_queue(harness)
    harness.call("POST", "/v1/queues/orders/pause")
    [created] = post(harness, {"body": 1, "delay": 5})
    harness.dispatch(harness.timers())
    harness.dispatch(harness.timers())
    doc = get(harness, created["id"])
    assert (doc["status"], doc["attempts"], doc["due_at"], harness.receiver.requests) == (
        "pending",
        0,
        created["due_at"],
        [],
    )


def test_resume_delivers_what_fell_due_meanwhile(harness: Harness) -> None:
    make_queue(harness)
    harness.call("POST", "/v1/queues/orders/pause")
    post(harness, {"body": 2, "delay": 20}, {"body": 1, "delay": 10}, {"body": 3, "delay": 30})
    harness.dispatch(harness.timers())
    status, doc = harness.call("POST", "/v1/queues/orders/resume")
    run_until_quiet(harness)
    assert (status, doc["paused"]) == (200, False)
    assert sorted(r["body"] for r in harness.receiver.requests) == [1, 2, 3]


def test_paused_message_can_be_cancelled(harness: Harness) -> None:
    make_queue(harness)
    harness.call("POST", "/v1/queues/orders/pause")
    [created] = post(harness, {"body": 1, "delay": 5})
    harness.dispatch(harness.timers())
    status, _ = harness.call("DELETE", f"/v1/queues/orders/messages/{created['id']}")
    harness.call("POST", "/v1/queues/orders/resume")
    run_until_quiet(harness)
    assert (status, get(harness, created["id"])["status"], harness.receiver.requests) == (204, "cancelled", [])


# attempt history -----------------------------------------------------------------------------
def test_every_attempt_is_recorded_with_its_outcome(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 5})
    run_until_quiet(harness)
    history = attempts(harness, created["id"])
    got = [(a["attempt"], a["outcome"], a["status_code"], a["error"], a["retry_at"] is not None) for a in history]
    assert got == [(1, "retry", 503, "HTTP 503", True), (2, "delivered", 200, None, False)]


def test_each_attempt_keeps_the_targets_response_body(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 5})
    run_until_quiet(harness)
    got = [(a["outcome"], a["response_body"]) for a in attempts(harness, created["id"])]
    assert got == [("retry", '{"code": 100}'), ("delivered", '{"code": 100}')]


def test_a_first_time_delivery_keeps_its_attempt_on_the_message_item_alone(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    run_until_quiet(harness)
    items = harness.ddb.scan(TableName="messages")["Items"]
    history_items = [i for i in items if i["sk"]["S"].startswith("a#")]
    got = [(a["attempt"], a["outcome"], a["status_code"]) for a in attempts(harness, created["id"])]
    assert (got, history_items) == ([(1, "delivered", 200)], [])


def test_attempts_of_an_unknown_message_is_a_404(harness: Harness) -> None:
    make_queue(harness)
    status, _ = harness.call("GET", "/v1/queues/orders/messages/0123456789abcdef0123456789abcdef/attempts")
    assert status == 404


def test_history_gets_the_finished_messages_ttl(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503, 200]
    [created] = post(harness, {"body": 1, "delay": 5})
    run_until_quiet(harness)
    items = harness.ddb.scan(TableName="messages")["Items"]
    message_ttl = {i["expire_at"]["N"] for i in items if i["sk"]["S"] == "m#" + created["id"]}
    history_ttl = {i.get("expire_at", {}).get("N") for i in items if i["sk"]["S"].startswith("a#")}
    assert history_ttl == message_ttl and len(message_ttl) == 1


# Retry-After ---------------------------------------------------------------------------------
def test_retry_after_beyond_backoff_max_is_honoured(harness: Harness) -> None:
    answers = [HttpReply(503, {"retry-after": "30"}, b""), HttpReply(200, {}, b"")]
    harness.ctx.post = lambda url, body, headers, **_: answers.pop(0)
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 3, "backoff_base": 1, "backoff_max": 2}})
    [created] = post(harness, {"body": 1, "delay": 5})
    run_until_quiet(harness)
    first, second = attempts(harness, created["id"])
    waited = parse_rfc3339(second["started_at"]) - parse_rfc3339(first["finished_at"])
    assert waited >= timedelta(seconds=30) and parse_rfc3339(first["retry_at"]) >= parse_rfc3339(
        first["finished_at"]
    ) + timedelta(seconds=30)


# redeliver -----------------------------------------------------------------------------------
def test_redelivered_failed_message_gets_a_fresh_budget(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [500, 500, 500, 500, 200]
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    status, doc = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/redeliver")
    assert (status, doc["status"], doc["expires_at"]) == (200, "pending", None)
    run_until_quiet(harness)
    final = get(harness, created["id"])
    assert (final["status"], final["attempts"], len(attempts(harness, created["id"]))) == ("delivered", 5, 5)


def test_redeliver_of_a_pending_message_is_a_409(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 3600})
    status, _ = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/redeliver")
    assert (status, get(harness, created["id"])["status"]) == (409, "pending")


def test_redeliver_of_an_unknown_message_is_a_404(harness: Harness) -> None:
    make_queue(harness)
    status, _ = harness.call("POST", "/v1/queues/orders/messages/0123456789abcdef0123456789abcdef/redeliver")
    assert status == 404


def test_redeliver_with_a_delay_is_due_then(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    now = harness.clock.now
    _, doc = harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/redeliver", {"delay": 600})
    assert parse_rfc3339(doc["due_at"]) == now + timedelta(seconds=600)


def test_redelivered_message_loses_its_ttl_with_its_history(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    harness.call("POST", f"/v1/queues/orders/messages/{created['id']}/redeliver", {"delay": 600})
    items = harness.ddb.scan(TableName="messages")["Items"]
    mine = [i for i in items if created["id"] in i["sk"]["S"]]
    assert len(mine) == 2 and all("expire_at" not in i for i in mine)


# failure destination -------------------------------------------------------------------------
def test_failure_destination_gets_exactly_the_failed_ones(harness: Harness) -> None:
    url = harness.sqs.create_queue(QueueName="target-failures")["QueueUrl"]
    make_queue(
        harness,
        settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}, "failure_destination": {"type": "sqs", "queue_url": url}},
    )
    harness.receiver.answers = [200, 500]
    _, bad = post(harness, {"body": "ok", "delay": 1}, {"body": "bad", "delay": 2})
    run_until_quiet(harness)
    notices = harness.target_messages(url)
    assert [(n["event"], n["id"], n["body"], n["status"]) for n in notices] == [
        ("message.failed", bad["id"], "bad", "failed")
    ]


def test_failure_destination_hears_of_expired_messages(harness: Harness) -> None:
    url = harness.sqs.create_queue(QueueName="target-expired")["QueueUrl"]
    make_queue(harness, settings={**HTTP_QUEUE, "failure_destination": {"type": "sqs", "queue_url": url}})
    harness.receiver.answers = [503]
    [created] = post(harness, {"body": 1, "delay": 1, "ttl": 1.5})
    run_until_quiet(harness)
    notices = harness.target_messages(url)
    assert [(n["event"], n["id"]) for n in notices] == [("message.expired", created["id"])]


def test_http_failure_destination_gets_the_notice(harness: Harness) -> None:
    make_queue(
        harness,
        settings={
            **HTTP_QUEUE,
            "retry": {"max_attempts": 1},
            "failure_destination": {"type": "http", "url": "http://127.0.0.1:9/failed"},
        },
    )
    harness.receiver.answers = [500]
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    notice = [r for r in harness.receiver.requests if r["url"].endswith("/failed")]
    assert [(n["body"]["event"], n["headers"]["Hourglass-Message-Id"]) for n in notice] == [
        ("message.failed", created["id"])
    ]


# failure notice outbox ----------------------------------------------------------------------
def scheduled_sweep(h: Harness) -> dict[str, Any]:
    return sweeper_handler.handle(h.ctx, {}, None)


def test_a_notice_lost_between_the_final_write_and_its_send_is_sent_by_the_sweep(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = harness.sqs.create_queue(QueueName="target-outbox")["QueueUrl"]
    make_queue(
        harness,
        settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}, "failure_destination": {"type": "sqs", "queue_url": url}},
    )
    harness.receiver.answers = [200, 500, 503]
    # The dispatcher dies right after each final write, before sending the notice.
    monkeypatch.setattr(failure_notices, "send_owed", lambda *args: False)
    _, bad, worse = post(
        harness, {"body": "ok", "delay": 1}, {"body": "bad", "delay": 2}, {"body": "worse", "delay": 3}
    )
    run_until_quiet(harness)
    monkeypatch.undo()
    assert harness.target_messages(url) == []
    assert scheduled_sweep(harness)["notices_recovered"] == 0  # not before the writer's grace has passed
    harness.clock.advance(failure_notice.OUTBOX_GRACE.total_seconds() + 5)
    assert scheduled_sweep(harness)["notices_recovered"] == 2
    notices = harness.target_messages(url)
    assert sorted((n["event"], n["id"]) for n in notices) == sorted(
        [("message.failed", bad["id"]), ("message.failed", worse["id"])]
    )
    assert scheduled_sweep(harness)["notices_recovered"] == 0  # sent once recovered: the outbox is empty


def test_a_notice_sent_at_once_leaves_nothing_for_the_sweep(harness: Harness) -> None:
    url = harness.sqs.create_queue(QueueName="target-sent")["QueueUrl"]
    make_queue(harness, settings={**HTTP_QUEUE, "failure_destination": {"type": "sqs", "queue_url": url}})
    harness.receiver.answers = [503]
    post(harness, {"body": 1, "delay": 1, "ttl": 1.5})
    run_until_quiet(harness)
    harness.clock.advance(failure_notice.OUTBOX_GRACE.total_seconds() + 5)
    assert scheduled_sweep(harness)["notices_recovered"] == 0
    assert [n["event"] for n in harness.target_messages(url)] == ["message.expired"]


def test_a_failed_notice_send_is_retried_by_the_sweep_until_it_succeeds(harness: Harness) -> None:
    make_queue(
        harness,
        settings={
            **HTTP_QUEUE,
            "retry": {"max_attempts": 1},
            "failure_destination": {"type": "http", "url": "http://127.0.0.1:9/failed"},
        },
    )
    harness.receiver.answers = [500, 502, 503]  # the attempt, the notice at once, the first recovery
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    # Each failed try waits its own backoff (1, then 2 minutes, each up to a quarter more).
    harness.clock.advance(failure_notice.backoff(created["id"], 1).total_seconds())
    assert scheduled_sweep(harness)["notices_recovered"] == 0
    assert scheduled_sweep(harness)["notices_recovered"] == 0  # not before its next try
    harness.clock.advance(failure_notice.backoff(created["id"], 2).total_seconds())
    assert scheduled_sweep(harness)["notices_recovered"] == 1
    tried = [r["headers"]["Hourglass-Message-Id"] for r in harness.receiver.requests if r["url"].endswith("/failed")]
    assert tried == [created["id"]] * 3


def test_a_message_of_a_queue_without_destination_is_never_in_the_outbox(harness: Harness) -> None:
    make_queue(harness, settings={**HTTP_QUEUE, "retry": {"max_attempts": 1}})
    harness.receiver.answers = [500]
    [created] = post(harness, {"body": 1})
    run_until_quiet(harness)
    item = harness.ddb.get_item(
        TableName=harness.ctx.settings.table, Key={"pk": {"S": "orders"}, "sk": {"S": f"m#{created['id']}"}}
    )["Item"]
    assert (item["status"]["S"], "sweep_pk" in item) == ("failed", False)


def test_a_dead_lettered_message_whose_notice_was_lost_is_notified_by_the_sweep(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = harness.sqs.create_queue(QueueName="target-dlq")["QueueUrl"]
    make_queue(harness, settings={**HTTP_QUEUE, "failure_destination": {"type": "sqs", "queue_url": url}})
    [created] = post(harness, {"body": "stuck", "delay": 5})
    [timer] = harness.timers()
    monkeypatch.setattr(failure_notices, "send_owed", lambda *args: False)  # the consumer dies after its write
    assert DeadLetters(harness.ctx).run_batch([("r1", timer["body"], 11)]) == []
    monkeypatch.undo()
    assert get(harness, created["id"])["status"] == "failed"
    harness.clock.advance(failure_notice.OUTBOX_GRACE.total_seconds() + 5)
    assert scheduled_sweep(harness)["notices_recovered"] == 1
    assert [(n["event"], n["id"]) for n in harness.target_messages(url)] == [("message.failed", created["id"])]


# charts --------------------------------------------------------------------------------------
def test_the_queues_metrics_count_its_deliveries_in_the_current_minute(harness: Harness) -> None:
    history = MinuteHistory(lambda: harness.clock().timestamp())
    harness.ctx.metrics.history = history
    harness.ctx.metric_series = history
    make_queue(harness)
    harness.receiver.answers = [503, 200, 200]
    post(harness, {"body": 1}, {"body": 2})
    run_until_quiet(harness)
    status, doc = harness.call("GET", "/v1/queues/orders/metrics", params={"range": "hour"})
    series = doc["series"]
    got = (status, doc["source"], len(doc["times"]), sum(series["delivered"]), sum(series["retried"]))
    assert got == (200, "local", 60, 2.0, 1.0)
    assert series["lateness_p99_ms"][-1] is not None


def test_metrics_of_an_unknown_queue_is_a_404_and_a_bad_range_a_400(harness: Harness) -> None:
    make_queue(harness)
    missing, _ = harness.call("GET", "/v1/queues/nope/metrics")
    bad, doc = harness.call("GET", "/v1/queues/orders/metrics", params={"range": "year"})
    assert (missing, bad, doc["error"]["message"]) == (404, 400, "range: must be hour or day")


def test_a_history_past_what_one_response_holds_is_read_whole_page_by_page(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    costly = replace(FINAL, message_id=created["id"])  # each ~5 KB as a proxy response escapes it
    for n in range(1, 1_501):
        harness.ctx.store.put_attempt("orders", replace(costly, attempt=n))
    pages: list[list[int]] = []
    cursor: dict[str, str] | None = None
    while True:
        status, doc = harness.call("GET", f"/v1/queues/orders/messages/{created['id']}/attempts", params=cursor)
        assert status == 200, doc
        pages.append([a["attempt"] for a in doc["attempts"]])
        if doc["next_cursor"] is None:
            break
        cursor = {"cursor": doc["next_cursor"]}
    assert (len(pages) > 1, sorted(n for page in pages for n in page)) == (True, list(range(1, 1_501)))


def test_an_attempts_cursor_that_is_no_attempt_number_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    status, doc = harness.call("GET", f"/v1/queues/orders/messages/{created['id']}/attempts", params={"cursor": "x"})
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "cursor")
