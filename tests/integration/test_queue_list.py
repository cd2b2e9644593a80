"""GET /v1/queues under mock_aws: every queue in name order, paged, without deleted ones."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue


def names(harness: Harness, **params: str) -> tuple[list[str], Any]:
    status, doc = harness.call("GET", "/v1/queues", params=params or None)
    assert status == 200, doc
    return [q["name"] for q in doc["queues"]], doc["next_cursor"]


def test_lists_every_queue_in_name_order_with_its_settings(harness: Harness) -> None:
    for name in ("orders", "billing", "alerts"):
        make_queue(harness, name)
    harness.call("POST", "/v1/queues/billing/pause")
    status, doc = harness.call("GET", "/v1/queues")
    assert status == 200
    assert [(q["name"], q["paused"]) for q in doc["queues"]] == [
        ("alerts", False),
        ("billing", True),
        ("orders", False),
    ]
    assert doc["next_cursor"] is None


def test_pages_follow_next_cursor_to_the_end(harness: Harness) -> None:
    for n in range(5):
        make_queue(harness, f"q{n}")
    first, cursor = names(harness, limit="2")
    second, cursor = names(harness, limit="2", cursor=cursor)
    third, cursor = names(harness, limit="2", cursor=cursor)
    assert (first, second, third, cursor) == (["q0", "q1"], ["q2", "q3"], ["q4"], None)


def test_replacing_a_queue_lists_it_once(harness: Harness) -> None:
    make_queue(harness, "orders")
    make_queue(harness, "orders")
    assert names(harness) == (["orders"], None)


def test_a_deleted_queue_is_not_listed(harness: Harness) -> None:
    make_queue(harness, "orders")
    make_queue(harness, "billing")
    assert harness.call("DELETE", "/v1/queues/orders")[0] == 204
    assert names(harness) == (["billing"], None)


def test_a_registered_name_without_its_queue_is_skipped(harness: Harness) -> None:
    make_queue(harness, "orders")
    harness.ctx.store.register_queue("half-created")
    assert names(harness) == (["orders"], None)


def test_bad_limit_cursor_or_parameter_is_a_400_naming_it(harness: Harness) -> None:
    long_name = base64.urlsafe_b64encode(json.dumps({"after": "q" * 2000}).encode()).decode()[:2048]
    cases = [({"limit": "0"}, "limit"), ({"cursor": "%%%"}, "cursor"), ({"cursor": long_name}, "cursor")]
    for params, field in [*cases, ({"status": "x"}, "status")]:
        status, doc = harness.call("GET", "/v1/queues", params=params)
        assert status == 400 and doc["error"]["message"].startswith(field), (params, doc)
