"""Issue 10 input side: what is accepted can be sent (URLs, headers, sizes, JSON), else a 4xx at create."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler

import pytest
from hourglass.adapters import http_target

from tests.integration.conftest import Harness
from tests.security.conftest import FakeDns, Server, answer

Serve = Callable[[Callable[..., None]], Server]


def real_http(h: Harness) -> Harness:
    h.ctx.settings = replace(h.ctx.settings, allow_private_callbacks=True)
    h.ctx.post = http_target.post
    return h


def status_of(h: Harness, message_id: str, queue: str = "q") -> dict:
    return h.call("GET", f"/v1/queues/{queue}/messages/{message_id}")[1]


def test_a_unicode_callback_path_is_delivered_percent_encoded(harness: Harness, serve: Serve) -> None:
    server = serve(answer(200))
    h = real_http(harness)
    url = f"http://127.0.0.1:{server.port}/café/€?q=é"
    assert h.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": url}})[0] == 201
    [created] = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})[1]["messages"]
    h.dispatch(h.timers())
    assert status_of(h, created["id"])["status"] == "delivered"
    assert [s.path for s in server.seen] == ["/caf%C3%A9/%E2%82%AC?q=%C3%A9"]


def test_an_idna_host_is_resolved_and_sent_in_ascii(
    harness: Harness, serve: Serve, dns: FakeDns
) -> None:
    server = serve(answer(200))
    dns.answers["xn--bcher-kva.example"] = ["127.0.0.1"]
    h = real_http(harness)
    target = {"type": "http", "url": f"http://bücher.example:{server.port}/hook"}
    h.call("PUT", "/v1/queues/q", {})
    status, doc = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1, "target": target}]})
    assert status == 201
    message_id = doc["messages"][0]["id"]
    assert status_of(h, message_id)["target"]["url"] == f"http://xn--bcher-kva.example:{server.port}/hook"
    h.dispatch(h.timers())
    assert status_of(h, message_id)["status"] == "delivered"
    assert [s.host for s in server.seen] == [f"xn--bcher-kva.example:{server.port}"]


@pytest.mark.parametrize("value", ["€uro", "a\u2028b", "x\x7fy", "\x85", "café\r\nX-Injected: 1", "a\x00b"])
def test_header_values_http_cannot_carry_are_refused_naming_the_header(harness: Harness, value: str) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    target = {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": {"X-Tag": value}}
    status, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1, "target": target}]})
    assert status == 400
    assert doc["error"]["message"].startswith("messages[0].target.headers.X-Tag:")
    assert harness.call("GET", "/v1/queues/q/messages")[1]["messages"] == []


def test_a_latin1_header_value_is_delivered(harness: Harness, serve: Serve) -> None:
    seen: list[str] = []

    def record(handler: BaseHTTPRequestHandler) -> None:
        seen.append(handler.headers.get("X-Tag", ""))
        answer(200)(handler)

    server = serve(record)
    h = real_http(harness)
    target = {"type": "http", "url": server.url(), "headers": {"X-Tag": "café\tau lait"}}
    assert h.call("PUT", "/v1/queues/q", {"target": target})[0] == 201
    [created] = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})[1]["messages"]
    h.dispatch(h.timers())
    assert status_of(h, created["id"])["status"] == "delivered"
    assert seen == ["café\tau lait"]


@pytest.mark.parametrize("name", ["Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Proxy-Authorization"])
def test_hop_by_hop_headers_are_refused(harness: Harness, name: str) -> None:
    target = {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": {name: "x"}}
    status, doc = harness.call("PUT", "/v1/queues/q", {"target": target})
    assert (status, doc["error"]["message"].split(":")[0]) == (400, f"target.headers.{name}")


def test_a_message_stored_with_an_unencodable_header_fails_instead_of_sticking(
    harness: Harness, serve: Serve
) -> None:
    """Stored before the header rule (written straight to the table): it ends failed, with a reason."""
    server = serve(answer(200))
    h = real_http(harness)
    h.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": server.url()}})
    [created] = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})[1]["messages"]
    stored = h.ctx.store.get_queue("q")
    assert stored is not None
    from hourglass.core.model import HttpTarget

    bad = replace(stored, settings=replace(stored.settings, target=HttpTarget(url=server.url(), headers={"X": "€"})))
    h.ctx.store.put_queue(bad)
    h.dispatch(h.timers())
    doc = status_of(h, created["id"])
    assert doc["status"] == "failed"
    assert "cannot be encoded" in doc["last_error"]
    assert server.seen == []


def test_too_large_item_is_a_413_and_nothing_is_stored(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    headers = {f"X-{i}": "é" * 4096 for i in range(32)}
    target = {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": headers}
    message = {"body": "x" * 200_000, "target": target}
    status, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [message]})
    assert (status, doc["error"]["code"]) == (413, "too_large")
    assert doc["error"]["message"].startswith("messages[0].target.headers:")
    assert harness.call("GET", "/v1/queues/q/messages")[1]["messages"] == []


def test_a_patch_whose_body_would_overflow_the_item_is_a_413(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    headers = {f"X-{i}": "é" * 3000 for i in range(32)}
    target = {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": headers}
    message = {"body": 1, "target": target, "delay": 3600}
    [created] = harness.call("POST", "/v1/queues/q/messages", {"messages": [message]})[1]["messages"]
    status, doc = harness.call("PATCH", f"/v1/queues/q/messages/{created['id']}", {"body": "x" * 250_000})
    assert (status, doc["error"]["code"]) == (413, "too_large")
    assert status_of(harness, created["id"])["body"] == 1


def test_a_body_over_the_sqs_envelope_is_a_413_for_an_sqs_target(harness: Harness) -> None:
    url = harness.sqs.create_queue(QueueName="target")["QueueUrl"]
    harness.call("PUT", "/v1/queues/q", {"target": {"type": "sqs", "queue_url": url}})
    status, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": "x" * (256 * 1024 - 2)}]})
    assert (status, doc["error"]["message"].split(":")[0]) == (413, "messages[0].body")


def test_the_largest_accepted_sqs_body_is_delivered(harness: Harness) -> None:
    from hourglass.core import limits

    url = harness.sqs.create_queue(QueueName="target")["QueueUrl"]
    harness.sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": str(256 * 1024)})
    harness.call("PUT", "/v1/queues/q", {"target": {"type": "sqs", "queue_url": url}})
    body = "é" * ((limits.SQS_MESSAGE_BYTES - limits.ENVELOPE_OVERHEAD - 2) // 2)
    status, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": body}]})
    assert status == 201
    harness.dispatch(harness.timers())
    assert status_of(harness, doc["messages"][0]["id"])["status"] == "delivered"
    assert harness.target_messages(url)[0]["body"] == body


@pytest.mark.parametrize("raw", ['{"messages": [{"body": 1e400}]}', '{"messages": [{"body": [NaN]}]}'])
def test_out_of_range_json_is_a_400_and_nothing_is_stored(harness: Harness, raw: str) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    status, doc = harness.call("POST", "/v1/queues/q/messages", raw)
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "body")
    assert harness.call("GET", "/v1/queues/q/messages")[1]["messages"] == []


def test_duplicate_keys_are_a_400_naming_the_key(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    status, doc = harness.call("POST", "/v1/queues/q/messages", '{"messages": [{"body": 1, "body": 2}]}')
    assert status == 400
    assert '"body" appears twice' in doc["error"]["message"]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PATCH"])
def test_the_later_namespace_is_not_reachable_through_the_queue_api(harness: Harness, method: str) -> None:
    harness.ctx.check_url = lambda url, allow_private: None
    status, doc = harness.call("POST", "/create", {"topic": "t", "delay": 60, "callback": "http://127.0.0.1:9/cb"})
    assert status == 200
    body = {"delay": 5} if method == "PATCH" else None
    status, answer_doc = harness.call(method, f"/v1/queues/@later/messages/{doc['id']}", body)
    assert (status, answer_doc["error"]["message"].split(":")[0]) == (400, "queue")
    assert harness.call("POST", "/query", {"id": doc["id"]})[1]["execute_time"] > 0


def test_a_deliver_at_with_sub_millisecond_precision_is_due_at_the_next_millisecond(harness: Harness) -> None:
    harness.call("PUT", "/v1/queues/q", {})
    message = {"body": 1, "deliver_at": "2026-11-21T11:00:00.0000001Z"}
    [created] = harness.call("POST", "/v1/queues/q/messages", {"messages": [message]})[1]["messages"]
    assert created["due_at"] == "2026-11-21T11:00:00.001Z"


def test_a_list_page_is_cut_by_size_and_the_cursor_continues(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    from hourglass.core import limits

    harness.call("PUT", "/v1/queues/q", {})
    for _ in range(3):
        harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": "x" * 200_000, "delay": 60}] * 10})
    monkeypatch.setattr(limits, "MAX_PAGE_BYTES", 2_500_000)
    monkeypatch.setattr(limits.page_length, "__defaults__", (2_500_000,))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        status, doc = harness.call("GET", "/v1/queues/q/messages", params=params)
        assert status == 200
        assert len(json.dumps(doc).encode()) <= 2_600_000
        seen += [m["id"] for m in doc["messages"]]
        pages += 1
        cursor = doc["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 30
    assert pages >= 3


def test_an_sqs_target_outside_the_setting_is_a_400_naming_queue_url(harness: Harness) -> None:
    other = harness.sqs.create_queue(QueueName="payments")["QueueUrl"]
    status, doc = harness.call("PUT", "/v1/queues/q", {"target": {"type": "sqs", "queue_url": other}})
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "target.queue_url")
    assert harness.call("GET", "/v1/queues/q")[0] == 404


def test_the_timer_queue_is_never_a_target(harness: Harness) -> None:
    harness.ctx.settings = replace(harness.ctx.settings, sqs_targets="timer")
    harness.call("PUT", "/v1/queues/q", {})
    own = {"type": "sqs", "queue_url": harness.ctx.settings.timer_queue_url}
    status, doc = harness.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1, "target": own}]})
    assert (status, doc["error"]["message"].split(":")[0]) == (400, "messages[0].target.queue_url")
    assert "own queues" in doc["error"]["message"]
