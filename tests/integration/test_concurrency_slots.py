"""Concurrency lease slots on in-process DynamoDB, with threads racing (moto made atomic as DynamoDB is)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from hourglass.core import keys
from hourglass.core.concurrency import holder

from tests.integration import test_item_formats
from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, make_queue, post

NOW_MS = 1_000_000
LIMIT = keys.SLOT_GROUP + 1  # slots in two partitions of their own (layout 2)


@pytest.mark.parametrize(("layout", "flow_key"), [(1, None), (2, None), (2, "k1")], ids=["own", "spread", "key"])
def test_racing_acquirers_never_hold_more_than_the_limit(harness: Harness, layout: int, flow_key: str | None) -> None:
    store = harness.ctx.store
    lock = threading.Lock()
    held: list[int] = []
    peak: list[int] = [0]
    granted: list[int] = [0]

    def attempt(worker: int) -> None:
        for n in range(10):
            lease = store.acquire_slot(
                "q", LIMIT, holder(f"m{worker}", n), NOW_MS + 60_000, NOW_MS, n, flow_key, layout
            )
            if lease is None:
                continue
            with lock:
                held.append(lease.slot)
                peak[0] = max(peak[0], len(held))
                granted[0] += 1
            time.sleep(0.002)  # hold the slot a moment so that the others race for it
            with lock:
                held.remove(lease.slot)
            store.release_slot("q", lease)

    threads = [threading.Thread(target=attempt, args=(w,)) for w in range(LIMIT + 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] <= LIMIT < granted[0]


def test_a_slot_frees_itself_when_its_lease_ends(harness: Harness) -> None:
    store = harness.ctx.store
    leases = [store.acquire_slot("q", 1, holder(f"m{i}", 1), NOW_MS + 1_000, NOW_MS) for i in range(2)]
    later = store.acquire_slot("q", 1, holder("m9", 1), NOW_MS + 9_000, NOW_MS + 2_000)
    assert (leases[0] is not None, leases[1], later is not None) == (True, None, True)


def test_a_late_release_by_an_older_holder_frees_nothing(harness: Harness) -> None:
    store = harness.ctx.store
    old = store.acquire_slot("q", 1, holder("old", 1), NOW_MS + 1_000, NOW_MS)
    new = store.acquire_slot("q", 1, holder("new", 1), NOW_MS + 9_000, NOW_MS + 2_000)
    assert old is not None and new is not None
    store.release_slot("q", old)
    refused: Any = store.acquire_slot("q", 1, holder("third", 1), NOW_MS + 9_000, NOW_MS + 3_000)
    assert refused is None


def message_at(harness: Harness) -> tuple[str, int]:
    """A pending message of queue `q` and its version (the version its timer carries)."""
    make_queue(harness, "q")
    (created,) = post(harness, {"body": 1, "delay": 3600}, queue="q")
    message = harness.ctx.store.get_message("q", created["id"])
    assert message is not None
    return message.id, message.version


def test_a_slot_whose_holder_has_no_message_waits_for_its_lease(harness: Harness) -> None:
    # A timer can beat its message's ingest write: its begin may still come.
    assert harness.ctx.store.acquire_slot("q", 1, holder("ghost", 1), NOW_MS + 60_000, NOW_MS)
    assert harness.ctx.store.acquire_slot("q", 1, holder("next", 1), NOW_MS + 60_000, NOW_MS + 1_000) is None


def test_a_slot_whose_holder_has_not_begun_waits_for_its_lease(harness: Harness) -> None:
    message_id, version = message_at(harness)
    assert harness.ctx.store.acquire_slot("q", 1, holder(message_id, version), NOW_MS + 60_000, NOW_MS)
    assert harness.ctx.store.acquire_slot("q", 1, holder("next", 1), NOW_MS + 60_000, NOW_MS + 1_000) is None


def test_a_slot_is_taken_once_its_holders_message_moved_on(harness: Harness) -> None:
    message_id, version = message_at(harness)
    assert harness.ctx.store.acquire_slot("q", 1, holder(message_id, version), NOW_MS + 60_000, NOW_MS)
    status, _ = harness.call("DELETE", f"/v1/queues/q/messages/{message_id}")
    taken = harness.ctx.store.acquire_slot("q", 1, holder("next", 1), NOW_MS + 60_000, NOW_MS + 1_000)
    assert (status, taken is not None) == (204, True)


def test_two_slots_kept_by_one_holder_are_both_taken_once_it_ended(harness: Harness) -> None:
    # The same timer's attempt may have kept two slots (a release lost): its message is read once for both.
    message_id, version = message_at(harness)
    store = harness.ctx.store
    kept = [store.acquire_slot("q", 2, holder(message_id, version), NOW_MS + 60_000, NOW_MS, seed) for seed in (0, 1)]
    harness.call("DELETE", f"/v1/queues/q/messages/{message_id}")
    taken = [store.acquire_slot("q", 2, holder(f"next{i}", 1), NOW_MS + 60_000, NOW_MS + 1_000) for i in range(2)]
    assert (len({lease.slot for lease in kept if lease}), all(taken)) == (2, True)


def slot_partitions(h: Harness) -> set[str]:
    items = h.ddb.scan(
        TableName=h.ctx.settings.table,
        FilterExpression="begins_with(sk, :s)",
        ExpressionAttributeValues={":s": {"S": keys.SLOT_PREFIX}},
    )["Items"]
    return {item["pk"]["S"] for item in items}


def test_a_new_queues_slots_are_in_partitions_of_their_own(harness: Harness) -> None:
    make_queue(harness, settings={**HTTP_QUEUE, "max_concurrency": 100, "flow_control": {"key_max_concurrency": 2}})
    post(harness, *({"body": i, "flow_key": "k1"} for i in range(3)))
    harness.dispatch(harness.timers())
    found = slot_partitions(harness)
    assert found and all(pk.startswith(("orders#c", "orders#k")) for pk in found)
    assert {"orders#c" in pk for pk in found} == {True, False}  # the queue's slots and the key's


def test_a_queue_stored_by_1_2_0_keeps_its_slots_in_its_own_partition(harness: Harness) -> None:
    test_item_formats.load_1_2_0(harness)
    harness.clock.now += timedelta(hours=1)
    harness.sweep()
    harness.dispatch(harness.timers())
    assert slot_partitions(harness) == {"orders"}
