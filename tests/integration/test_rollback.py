"""`devstack.rollback`: a rollback to a release before ordering, due-bucket widths and outbox shards is refused
while the table holds any, and allowed once it holds none; `rehome` moves what an older release would not read
into the partitions it reads (docs/upgrades.md, rule 8)."""

from __future__ import annotations

from datetime import datetime

import pytest
from hourglass.adapters.store import Store
from hourglass.core import failure_notice, keys
from hourglass.service import failure_notices

from devstack.rollback import Deployed, blockers, rehome
from tests.integration import test_circuit_breaker, test_notice_outbox
from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, make_queue, post

ORDERED = {**HTTP_QUEUE, "ordering": {"by": "flow_key", "on_failure": "hold"}}
SHARDS = 8


def deployed(h: Harness, now: datetime | None = None) -> Deployed:
    return Deployed(Store(h.ctx.settings.table, client=h.ddb), SHARDS, now or h.clock.now)


def sweep_pk(h: Harness, message_id: str) -> str:
    item = h.ddb.get_item(TableName=h.ctx.settings.table, Key={"pk": {"S": "orders"}, "sk": {"S": f"m#{message_id}"}})
    return str(item["Item"]["sweep_pk"]["S"])


def in_a_wide_shard(h: Harness, width: int = 4 * SHARDS) -> str:
    """A message due in 2 h whose due-index entry sits beyond the base shards of its bucket, recorded `width` wide."""
    make_queue(h)
    [created] = post(h, {"body": 1, "delay": 7200})
    bucket_text, shard = sweep_pk(h, created["id"]).split("#")
    bucket = int(bucket_text)
    store = deployed(h).store
    store.widen_bucket(bucket, width, expire_at=int(h.clock.now.timestamp()) + 9000)
    item_key = {"pk": {"S": "orders"}, "sk": {"S": f"m#{created['id']}"}}
    wide = keys.bucket_pk(bucket, int(shard) + SHARDS)
    h.ddb.update_item(
        TableName=h.ctx.settings.table,
        Key=item_key,
        UpdateExpression="SET sweep_pk = :p",
        ExpressionAttributeValues={":p": {"S": wide}},
    )
    return str(created["id"])


def test_a_queue_with_ordering_refuses_a_rollback_to_a_release_without_it(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    harness.call("PUT", "/v1/queues/plain", HTTP_QUEUE)
    found = blockers(deployed(harness), "v1.2.0")
    assert [("'orders'" in b.what, b.since) for b in found] == [(True, "1.3.0")]


def test_the_rollback_is_allowed_once_the_queue_no_longer_orders(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    harness.call("PUT", "/v1/queues/orders", HTTP_QUEUE)
    assert blockers(deployed(harness), "v1.2.0") == []


def test_a_release_that_has_ordering_is_not_refused(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    assert blockers(deployed(harness), "v1.3.0") == []


def test_a_message_in_a_shard_beyond_the_base_refuses_the_rollback(harness: Harness) -> None:
    in_a_wide_shard(harness)
    found = blockers(deployed(harness), "v1.2.0")
    assert ["1 message(s) in shards beyond" in b.what for b in found] == [True]


def test_a_wide_bucket_with_nothing_beyond_its_base_shards_does_not_refuse(harness: Harness) -> None:
    store = deployed(harness).store
    now = int(harness.clock.now.timestamp())
    store.widen_bucket(now // 60 + 5, 64, expire_at=now + 600)
    assert blockers(deployed(harness), "v1.2.0") == []


def test_rehome_moves_the_message_into_the_base_shard_it_falls_under(harness: Harness) -> None:
    message_id = in_a_wide_shard(harness)
    moved = rehome(deployed(harness))
    _, shard = sweep_pk(harness, message_id).split("#")
    assert (moved, int(shard) < SHARDS, blockers(deployed(harness), "v1.2.0")) == (1, True, [])


def test_a_rehomed_message_is_still_swept_and_delivered(harness: Harness) -> None:
    message_id = in_a_wide_shard(harness)
    rehome(deployed(harness))
    harness.clock.advance(7200 - 30)
    harness.sweep()
    harness.dispatch(harness.timers())
    _, doc = harness.call("GET", f"/v1/queues/orders/messages/{message_id}")
    assert doc["status"] == "delivered"


def owed_in_a_shard(h: Harness, monkeypatch: pytest.MonkeyPatch) -> str:
    """A message ended failed whose writer died before sending its notice: its entry waits in an outbox shard."""
    [message_id] = test_notice_outbox.left_in_the_outbox(h, monkeypatch, 1, [200])
    return message_id


def test_a_notice_owed_in_an_outbox_shard_refuses_the_rollback(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    owed_in_a_shard(harness, monkeypatch)
    found = blockers(deployed(harness), "v1.2.0")
    assert ["1 notice(s) still owed" in b.what for b in found] == [True]


def test_rehome_moves_an_owed_notice_into_the_unsharded_outbox(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id = owed_in_a_shard(harness, monkeypatch)
    moved = rehome(deployed(harness))
    assert (moved, sweep_pk(harness, message_id), blockers(deployed(harness), "v1.2.0")) == (1, keys.OUTBOX_PK, [])


def test_rehome_moves_a_queue_paused_notice_into_the_unsharded_outbox(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    test_circuit_breaker.breaker_queue(harness)
    monkeypatch.setattr(failure_notices, "send_queue_paused", lambda *args: False)
    test_circuit_breaker.send(harness, test_circuit_breaker.BREAKER["min_attempts"])
    monkeypatch.undo()
    rehome(deployed(harness))
    [entry] = harness.ctx.store.due_entries(keys.OUTBOX_PK)
    assert (failure_notice.is_queue_paused(entry.id), blockers(deployed(harness), "v1.2.0")) == (True, [])


def test_a_rehomed_queue_paused_notice_is_still_sent(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    test_circuit_breaker.breaker_queue(harness)
    monkeypatch.setattr(failure_notices, "send_queue_paused", lambda *args: False)
    test_circuit_breaker.send(harness, test_circuit_breaker.BREAKER["min_attempts"])
    monkeypatch.undo()
    rehome(deployed(harness))
    test_circuit_breaker.sweeps(harness, int(failure_notice.OUTBOX_GRACE.total_seconds() // 60) + 1)
    assert [n["queue"] for n in test_circuit_breaker.paused_notices(harness)] == ["orders"]
