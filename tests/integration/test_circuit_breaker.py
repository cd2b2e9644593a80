"""The circuit breaker (v1.2): a queue whose attempts fail pauses itself, says why, tells its failure
destination, and a resume starts a fresh window."""

from __future__ import annotations

from typing import Any

import pytest
from hourglass.core import failure_notice, keys
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import failure_notices

from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, make_queue, post

HOOK = "http://127.0.0.1:9/hook"
NOTICES = "http://127.0.0.1:9/notices"
BREAKER = {"failure_ratio": 0.5, "min_attempts": 5, "window": 60}


def breaker_queue(h: Harness) -> None:
    settings = {
        **HTTP_QUEUE,
        "retry": {"max_attempts": 1},  # one attempt per message: the counts are the messages sent
        "circuit_breaker": BREAKER,
        "failure_destination": {"type": "http", "url": NOTICES},
    }
    make_queue(h, settings=settings)
    h.receiver.by_url[HOOK] = [500]


def send(h: Harness, count: int) -> None:
    """One message at a time, each dispatched before the next: one attempt in flight."""
    for n in range(count):
        post(h, {"body": {"n": n}})
        h.dispatch(h.timers())


def send_batch(h: Harness, count: int) -> None:
    """At once: a batch's attempts are in flight together before any outcome is known."""
    post(h, *({"body": {"n": n}} for n in range(count)))
    h.dispatch(h.timers())


def hook_calls(h: Harness) -> int:
    return sum(1 for r in h.receiver.requests if r["url"] == HOOK)


def queue_doc(h: Harness) -> dict[str, Any]:
    code, doc = h.call("GET", "/v1/queues/orders")
    assert code == 200
    return dict(doc)


def test_a_failing_target_trips_the_breaker_and_the_queue_says_why(harness: Harness) -> None:
    breaker_queue(harness)
    send(harness, 12)
    doc = queue_doc(harness)
    assert (doc["paused"], doc["paused_reason"], doc["circuit_breaker"]) == (True, "circuit_breaker", BREAKER)


def test_no_more_than_min_attempts_reach_the_failing_target(harness: Harness) -> None:
    breaker_queue(harness)
    send(harness, 12)
    assert hook_calls(harness) <= BREAKER["min_attempts"]


def test_at_most_min_attempts_plus_those_in_flight_reach_it_from_a_batch(harness: Harness) -> None:
    breaker_queue(harness)
    send_batch(harness, 30)
    in_flight = 10  # a timer carries up to ten messages, attempted together
    assert hook_calls(harness) <= BREAKER["min_attempts"] + in_flight
    assert queue_doc(harness)["paused_reason"] == "circuit_breaker"


def test_a_batchs_outcomes_are_added_to_one_breaker_item(harness: Harness) -> None:
    """Counted together (`service/circuit_breaker.OutcomeBatch`): a queue's breaker takes a write per dispatcher
    batch, not one per attempt (docs/capacity.md)."""
    breaker_queue(harness)
    send_batch(harness, 10)  # one timer pack of ten: one dispatcher batch
    items = harness.ddb.query(
        TableName=harness.ctx.settings.table,
        KeyConditionExpression="pk = :q AND begins_with(sk, :b)",
        ExpressionAttributeValues={":q": {"S": "orders"}, ":b": {"S": keys.BREAKER_PREFIX}},
    )["Items"]
    assert [(i["attempts"]["N"], i["failures"]["N"]) for i in items] == [("10", "10")]
    assert queue_doc(harness)["paused_reason"] == "circuit_breaker"


def test_the_failure_destination_gets_a_queue_paused_notice(harness: Harness) -> None:
    breaker_queue(harness)
    send(harness, 12)
    notices = [r["body"] for r in harness.receiver.requests if r["url"] == NOTICES]
    [notice] = [n for n in notices if n["event"] == "queue.paused"]
    assert (notice["event"], notice["queue"], notice["reason"], notice["failure_ratio"]) == (
        "queue.paused",
        "orders",
        "circuit_breaker",
        1.0,
    )


def paused_notices(h: Harness) -> list[dict[str, Any]]:
    """The queue.paused notices the failure destination was sent (each try)."""
    return [r["body"] for r in h.receiver.requests if r["url"] == NOTICES and r["body"]["event"] == "queue.paused"]


def sweeps(h: Harness, minutes: int) -> None:
    """Scheduled sweeper runs, one a minute, past the outbox's grace."""
    for _ in range(minutes):
        h.clock.advance(60)
        sweeper_handler.handle(h.ctx, {}, None)


def test_a_queue_paused_notice_the_destination_refused_once_is_sent_by_the_outbox(harness: Harness) -> None:
    breaker_queue(harness)
    harness.receiver.by_url[NOTICES] = [503]
    send(harness, BREAKER["min_attempts"])
    harness.receiver.by_url[NOTICES] = [200]
    sweeps(harness, int(failure_notice.OUTBOX_GRACE.total_seconds() // 60) + 10)
    # The trip's try (503), then recovery's (200), and none after it was sent.
    assert [n["reason"] for n in paused_notices(harness)] == ["circuit_breaker", "circuit_breaker"]


def test_a_queue_paused_notice_survives_a_dispatcher_dying_right_after_the_trip(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    breaker_queue(harness)
    monkeypatch.setattr(failure_notices, "send_queue_paused", lambda *args: False)
    send(harness, BREAKER["min_attempts"])
    monkeypatch.undo()
    assert paused_notices(harness) == []
    sweeps(harness, int(failure_notice.OUTBOX_GRACE.total_seconds() // 60) + 1)
    [notice] = paused_notices(harness)
    assert (notice["queue"], notice["failure_ratio"]) == ("orders", 1.0)


def test_deleting_the_queue_ends_its_pending_queue_paused_notice(harness: Harness) -> None:
    breaker_queue(harness)
    harness.receiver.by_url[NOTICES] = [503]
    send(harness, BREAKER["min_attempts"])
    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204
    harness.receiver.by_url[NOTICES] = [200]
    sweeps(harness, 30)
    assert len(paused_notices(harness)) == 1  # the trip's own try; none after the queue ended


def test_resume_starts_a_fresh_window(harness: Harness) -> None:
    breaker_queue(harness)
    send(harness, BREAKER["min_attempts"])  # trips on the last one: nothing is left held
    before = hook_calls(harness)
    code, doc = harness.call("POST", "/v1/queues/orders/resume")
    assert (code, doc["paused"], doc["paused_reason"]) == (200, False, None)
    # Fewer attempts than min_attempts after the resume: the failures before it do not count.
    send(harness, BREAKER["min_attempts"] - 1)
    assert hook_calls(harness) - before >= BREAKER["min_attempts"] - 1 and not queue_doc(harness)["paused"]


def test_a_queue_whose_attempts_succeed_does_not_trip(harness: Harness) -> None:
    breaker_queue(harness)
    harness.receiver.by_url[HOOK] = [200]
    send(harness, 12)
    assert (hook_calls(harness), queue_doc(harness)["paused"]) == (12, False)


def test_bad_breaker_settings_are_a_400_naming_the_field(harness: Harness) -> None:
    code, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "circuit_breaker": {"failure_ratio": 2}})
    assert code == 400 and "circuit_breaker.failure_ratio" in str(doc)
