"""`devstack.rollback`: a rollback to a release before ordering and due-bucket widths is refused while the table
holds either, and allowed once it holds neither; `rehome` moves what an older sweeper would not read into the
shards it reads (docs/upgrades.md, rule 8)."""

from __future__ import annotations

from datetime import datetime

from hourglass.adapters.store import Store
from hourglass.core import keys

from devstack.rollback import Deployed, blockers, rehome
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
