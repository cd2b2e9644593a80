"""The failure notice outbox over time: each entry its own next try, fair across queues, and a bounded end."""

from __future__ import annotations

from typing import Any

import pytest
from hourglass.core import failure_notice, keys
from hourglass.core.delivery import Outcome
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service import failure_notices

from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post
from tests.integration.test_openapi import check

HOST = "http://127.0.0.1:9"


def notifying_queue(h: Harness, name: str, destination: list[int]) -> str:
    """A queue whose messages fail at their first attempt, with an HTTP failure destination answering
    `destination` (its last answer repeats); returns the destination's URL."""
    url = f"{HOST}/{name}-failures"
    h.receiver.by_url[f"{HOST}/{name}-hook"] = [500]
    h.receiver.by_url[url] = list(destination)
    settings = {
        "target": {"type": "http", "url": f"{HOST}/{name}-hook"},
        "retry": {"max_attempts": 1},
        "failure_destination": {"type": "http", "url": url},
    }
    make_queue(h, name, settings)
    return url


def fail(h: Harness, queue: str, count: int = 1, delay: float = 1) -> list[str]:
    created = post(h, *({"body": i, "delay": delay} for i in range(count)), queue=queue)
    for _ in range(5):
        timers = h.timers()
        if not timers:
            break
        h.dispatch(timers)
    return [m["id"] for m in created]


def tries(h: Harness, url: str) -> int:
    return sum(1 for r in h.receiver.requests if r["url"] == url)


def sweeps(h: Harness, seconds: float, every: float) -> None:
    """Scheduled sweeper runs every `every` seconds for `seconds`."""
    for _ in range(int(seconds // every)):
        h.clock.advance(every)
        sweeper_handler.handle(h.ctx, {}, None)


def test_a_queue_of_notices_that_can_never_go_does_not_block_another_queues(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    notifying_queue(harness, "dead", [404])
    orders = notifying_queue(harness, "orders", [200])
    # Every writer dies after its final write: 100 dead notices, then one of orders, all in the outbox.
    monkeypatch.setattr(failure_notices, "send_owed", lambda *args: False)
    fail(harness, "dead", 100, delay=1)
    fail(harness, "orders", 1, delay=2)
    monkeypatch.undo()
    sweeps(harness, failure_notice.OUTBOX_GRACE.total_seconds() + 300, every=60)
    assert tries(harness, orders) == 1


def test_another_queues_notice_that_hit_one_503_is_sent_by_recovery(harness: Harness) -> None:
    notifying_queue(harness, "dead", [404])
    fail(harness, "dead", 100, delay=1)
    orders = notifying_queue(harness, "orders", [503, 200])
    fail(harness, "orders", 1, delay=2)
    sweeps(harness, failure_notice.OUTBOX_GRACE.total_seconds() + 300, every=60)
    assert tries(harness, orders) == 2  # the writer's (503), then recovery's (200)


def test_a_notice_the_destination_refuses_as_too_large_is_not_resent(harness: Harness) -> None:
    url = notifying_queue(harness, "orders", [413])
    fail(harness, "orders")
    sweeps(harness, 150, every=10)
    assert tries(harness, url) == 1


def test_a_notice_to_a_destination_that_stays_down_backs_off(harness: Harness) -> None:
    url = notifying_queue(harness, "orders", [503])
    fail(harness, "orders")
    sweeps(harness, 30 * 60, every=60)
    # Tried by the writer, then 1, 2, 4 and 8 minutes later (each up to a quarter later), not every sweep.
    assert 4 <= tries(harness, url) <= 5


def test_a_notice_that_keeps_failing_is_given_up_visibly_on_its_message(harness: Harness) -> None:
    url = notifying_queue(harness, "orders", [503])
    [message_id] = fail(harness, "orders")
    for _ in range(12 * 6):  # recovery alone (the sweeps of 12 hours of due buckets are not the point)
        harness.clock.advance(600)
        failure_notices.recover(harness.ctx)
    notice = get(harness, message_id)["notice"]
    assert (notice, tries(harness, url)) == (
        {"status": "abandoned", "tries": failure_notice.MAX_TRIES, "last_error": "HTTP 503", "next_try_at": None},
        failure_notice.MAX_TRIES,
    )


def test_a_given_up_notice_is_counted(harness: Harness) -> None:
    notifying_queue(harness, "orders", [404])
    fail(harness, "orders", 3)
    assert harness.ctx.metrics.counts["FailureNoticeAbandoned"] == 3


def test_given_up_notices_are_listed_for_the_queue(harness: Harness) -> None:
    notifying_queue(harness, "orders", [404])
    given_up = fail(harness, "orders", 2)
    post(harness, {"body": "later", "delay": 3600})
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"notice": "abandoned"})
    assert (status, sorted(m["id"] for m in doc["messages"])) == (200, sorted(given_up))


def test_a_pending_notice_shows_its_next_try_on_the_message(harness: Harness) -> None:
    notifying_queue(harness, "orders", [503])
    [message_id] = fail(harness, "orders")
    notice: dict[str, Any] = get(harness, message_id)["notice"]
    assert (notice["status"], notice["tries"], notice["last_error"]) == ("pending", 1, "HTTP 503")
    assert notice["next_try_at"] is not None


def test_a_next_try_is_not_written_over_a_newer_version(harness: Harness) -> None:
    notifying_queue(harness, "orders", [503])
    [message_id] = fail(harness, "orders")
    failed = harness.ctx.store.get_message("orders", message_id)
    assert failed is not None and failed.notice is not None
    harness.call("POST", f"/v1/queues/orders/messages/{message_id}/redeliver", {"delay": 600})
    failure = Outcome(False, retryable=True, error="HTTP 503")
    later = failure_notice.after_failure(message_id, 2, failure, harness.clock.now, harness.clock.now)
    assert not harness.ctx.store.record_notice(failed, later)
    doc = get(harness, message_id)
    assert (doc["status"], doc["notice"]) == ("pending", None)


def test_the_writers_failed_try_and_recoverys_tries_share_one_budget(harness: Harness) -> None:
    url = notifying_queue(harness, "orders", [503, 503, 200])
    [message_id] = fail(harness, "orders")
    sweeps(harness, 10 * 60, every=60)
    assert (tries(harness, url), get(harness, message_id)["notice"]) == (3, None)


def test_a_message_with_a_given_up_notice_fits_the_schema(harness: Harness) -> None:
    notifying_queue(harness, "orders", [404])
    [message_id] = fail(harness, "orders")
    status, doc = harness.call("GET", f"/v1/queues/orders/messages/{message_id}")
    assert doc["notice"]["status"] == "abandoned"
    check("/v1/queues/{queue}/messages/{id}", "GET", status, doc)


def test_a_down_destination_costs_a_recovery_run_only_a_few_tries(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = notifying_queue(harness, "orders", [503])
    monkeypatch.setattr(failure_notices, "send_owed", lambda *args: False)
    fail(harness, "orders", 10)
    monkeypatch.undo()
    harness.clock.advance(failure_notice.OUTBOX_GRACE.total_seconds() + 5)
    failure_notices.recover(harness.ctx)
    assert tries(harness, url) == failure_notices.QUEUE_FAILURES


def test_an_unknown_notice_filter_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"notice": "sent"})
    assert (status, doc["error"]["message"].startswith("notice:")) == (400, True)


# the outbox's partitions -------------------------------------------------------------------------
def outbox_partition(h: Harness, queue: str, message_id: str) -> str | None:
    item = h.ddb.get_item(TableName=h.ctx.settings.table, Key={"pk": {"S": queue}, "sk": {"S": f"m#{message_id}"}})
    pk = item["Item"].get("sweep_pk")
    return None if pk is None else str(pk["S"])


def left_in_the_outbox(h: Harness, monkeypatch: pytest.MonkeyPatch, count: int, destination: list[int]) -> list[str]:
    """`count` messages of "orders" ended failed by writers that died before sending their notices."""
    notifying_queue(h, "orders", destination)
    monkeypatch.setattr(failure_notices, "send_owed", lambda *args: False)
    ended = fail(h, "orders", count)
    monkeypatch.undo()
    return ended


def test_the_notices_of_many_endings_spread_over_the_outbox_partitions(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = left_in_the_outbox(harness, monkeypatch, 40, [200])
    partitions = {outbox_partition(harness, "orders", message_id) for message_id in ended}
    assert len(partitions) > 8 and partitions <= set(keys.outbox_shards())


def test_recovery_sends_the_notices_of_every_outbox_partition(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = left_in_the_outbox(harness, monkeypatch, 40, [200])
    sweeps(harness, failure_notice.OUTBOX_GRACE.total_seconds() + 60, every=60)
    assert [get(harness, message_id)["notice"] for message_id in ended] == [None] * 40


def test_a_notice_left_in_the_unsharded_outbox_of_1_2_0_is_still_sent(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    [message_id] = left_in_the_outbox(harness, monkeypatch, 1, [200])
    [entry] = [e for pk in keys.outbox_pks() for e in harness.ctx.store.due_entries(pk)]
    assert harness.ctx.store.move_due_entry(entry, keys.outbox_pk(message_id), keys.OUTBOX_PK)
    sweeps(harness, failure_notice.OUTBOX_GRACE.total_seconds() + 60, every=60)
    assert (get(harness, message_id)["notice"], outbox_partition(harness, "orders", message_id)) == (None, None)


def test_pending_notices_are_listed_from_the_sharded_and_the_unsharded_outbox(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = left_in_the_outbox(harness, monkeypatch, 2, [200])
    [entry, _] = sorted((e for pk in keys.outbox_pks() for e in harness.ctx.store.due_entries(pk)), key=str)
    harness.ctx.store.move_due_entry(entry, keys.outbox_pk(entry.id), keys.OUTBOX_PK)
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"notice": "pending"})
    assert (status, sorted(m["id"] for m in doc["messages"])) == (200, sorted(ended))
