"""Flow control per key and priority (contract v1.2): the fields on every path that creates a message, their
validation, the queue's `flow_control`, and the limits kept per key beside the queue-wide ones."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Harness
from tests.integration.test_flow import HTTP_QUEUE, get, make_queue, post
from tests.integration.test_schedules import occurrences, put

FLOW = {**HTTP_QUEUE, "flow_control": {"key_rate_limit": 2, "key_max_concurrency": 1}}


def error_field(doc: Any) -> str:
    return str(doc["error"]["message"]).split(":")[0]


# fields and validation -----------------------------------------------------------------------
def test_a_message_keeps_its_flow_key_and_priority(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "flow_key": "tenant-a", "priority": 9})
    doc = get(harness, created["id"])
    assert (doc["flow_key"], doc["priority"]) == ("tenant-a", 9)


def test_a_message_without_them_has_no_key_and_priority_5(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1})
    doc = get(harness, created["id"])
    assert (doc["flow_key"], doc["priority"]) == (None, 5)


def test_a_priority_out_of_range_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call(
        "POST", "/v1/queues/orders/messages", {"messages": [{"body": 1}, {"body": 2, "priority": 10}]}
    )
    assert (status, error_field(doc)) == (400, "messages[1].priority")


def test_a_flow_key_too_long_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "flow_key": "k" * 129}]})
    assert (status, error_field(doc)) == (400, "messages[0].flow_key")


def test_an_empty_flow_key_is_a_400(harness: Harness) -> None:
    make_queue(harness)
    status, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "flow_key": ""}]})
    assert (status, error_field(doc)) == (400, "messages[0].flow_key")


def test_the_list_filters_by_flow_key(harness: Harness) -> None:
    make_queue(harness)
    created = post(harness, {"body": 1, "flow_key": "a"}, {"body": 2, "flow_key": "b"}, {"body": 3})
    status, doc = harness.call("GET", "/v1/queues/orders/messages", params={"flow_key": "a"})
    assert (status, [m["id"] for m in doc["messages"]]) == (200, [created[0]["id"]])


def test_a_schedule_gives_its_key_and_priority_to_its_occurrences(harness: Harness) -> None:
    make_queue(harness)
    status, doc = put(harness, "daily", {"every": 3600, "body": 1, "flow_key": "t", "priority": 7})
    assert (status in (200, 201), doc["flow_key"], doc["priority"]) == (True, "t", 7)
    [occurrence] = occurrences(harness, "daily")
    assert (occurrence["flow_key"], occurrence["priority"]) == ("t", 7)


def test_a_schedule_with_a_bad_priority_is_a_400_naming_it(harness: Harness) -> None:
    make_queue(harness)
    status, doc = put(harness, "daily", {"every": 3600, "body": 1, "priority": -1})
    assert (status, error_field(doc)) == (400, "priority")


def test_the_queue_shows_its_flow_control(harness: Harness) -> None:
    make_queue(harness, settings=FLOW)
    status, doc = harness.call("GET", "/v1/queues/orders")
    assert (status, doc["flow_control"]) == (200, {"key_rate_limit": 2.0, "key_max_concurrency": 1})


def test_a_flow_control_out_of_range_is_a_400_naming_it(harness: Harness) -> None:
    status, doc = harness.call("PUT", "/v1/queues/orders", {**HTTP_QUEUE, "flow_control": {"key_max_concurrency": 0}})
    assert (status, error_field(doc)) == (400, "flow_control.key_max_concurrency")
