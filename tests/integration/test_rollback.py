"""`devstack.rollback`: a rollback to a release before ordering and due-bucket widths is refused while the table
holds either, and allowed once it holds neither (docs/upgrades.md, rule 8)."""

from __future__ import annotations

from hourglass.adapters.store import Store

from devstack.rollback import blockers
from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE

ORDERED = {**HTTP_QUEUE, "ordering": {"by": "flow_key", "on_failure": "hold"}}


def store_of(h: Harness) -> Store:
    return Store(h.ctx.settings.table, client=h.ddb)


def test_a_queue_with_ordering_refuses_a_rollback_to_a_release_without_it(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    harness.call("PUT", "/v1/queues/plain", HTTP_QUEUE)
    found = blockers(store_of(harness), "v1.2.0", harness.clock.now)
    assert [("'orders'" in b.what, b.since) for b in found] == [(True, "1.3.0")]


def test_the_rollback_is_allowed_once_the_queue_no_longer_orders(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    harness.call("PUT", "/v1/queues/orders", HTTP_QUEUE)
    assert blockers(store_of(harness), "v1.2.0", harness.clock.now) == []


def test_a_release_that_has_ordering_is_not_refused(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/orders", ORDERED)
    assert blockers(store_of(harness), "v1.3.0", harness.clock.now) == []


def test_a_widened_due_bucket_refuses_the_rollback_until_its_record_expires(harness: Harness) -> None:
    store = store_of(harness)
    now = int(harness.clock.now.timestamp())
    store.widen_bucket(now // 60 + 5, 64, expire_at=now + 600)
    store.widen_bucket(now // 60 - 30, 16, expire_at=now - 1)  # its messages are long handed off
    found = blockers(store, "v1.2.0", harness.clock.now)
    assert [f"bucket {now // 60 + 5} is spread over 64" in b.what for b in found] == [True]
