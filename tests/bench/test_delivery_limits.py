"""The write-unit part of the delivery-limits bench: limited queues pay for their items, unlimited ones nothing."""

from __future__ import annotations

import pytest

from bench.delivery_limits import units_per_message


def test_an_unlimited_queue_writes_no_pacing_or_slot_item() -> None:
    total, limit_items = units_per_message({}, 10, swept=False)
    assert (total, limit_items) == (pytest.approx(3.0), {})


def test_a_limited_queue_pays_one_pacing_write_per_batch_and_one_slot_write_per_attempt() -> None:
    # The slot is taken with one write and never released: the attempt's outcome frees it.
    total, limit_items = units_per_message({"rate_limit": 20, "max_concurrency": 5}, 10, swept=True)
    assert limit_items == {"pacing": pytest.approx(0.1), "concurrency slots": pytest.approx(1.0)}
    assert total == pytest.approx(6.0 + 0.1 + 1.0)
