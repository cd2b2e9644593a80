"""Callback URLs: private targets refused at create time and again at delivery, pinned address, only
http(s), no redirects followed, bounded time and response size."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hourglass.adapters import http_target
from hourglass.errors import ValidationError

from tests.integration.conftest import Harness
from tests.security.conftest import FakeDns, Server, answer, drip, silent

Serve = Callable[[Callable[..., None]], Server]
PRIVATE = [
    "http://127.0.0.1/hook",
    "http://127.1/hook",
    "http://2130706433/hook",
    "http://0x7f000001/hook",
    "http://localhost:8080/hook",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://10.1.2.3/hook",
    "http://172.16.0.1/hook",
    "http://192.168.0.10/hook",
    "http://100.64.0.1/hook",
    "http://224.0.0.1/hook",
    "http://0.0.0.0/hook",
    "https://[fe80::1]/hook",
    "http://rebind.example/hook",  # resolves to a private address (see `dns` below)
]
NOT_HTTP = ["ftp://example.com/x", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)", "data:,x"]
BAD = PRIVATE + NOT_HTTP


def table_items(h: Harness) -> int:
    return int(h.ddb.scan(TableName="messages", Select="COUNT")["Count"])


@pytest.fixture(autouse=True)
def names(dns: FakeDns) -> FakeDns:
    dns.answers.update({"hooks.example": ["93.184.216.34"], "rebind.example": ["93.184.216.34", "10.0.0.7"]})
    return dns


def test_queue_target_that_is_private_or_not_http_is_refused(guarded: Harness) -> None:
    answers = {url: guarded.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": url}}) for url in BAD}
    accepted = [url for url, (status, doc) in answers.items() if status != 400]
    unnamed = [url for url, (_, doc) in answers.items() if not doc["error"]["message"].startswith("target")]
    assert (accepted, unnamed, table_items(guarded)) == ([], [], 0)


def test_message_target_that_is_private_or_not_http_is_refused(guarded: Harness) -> None:
    assert guarded.call("PUT", "/v1/queues/q", {})[0] == 201
    before = table_items(guarded)
    answers = {
        url: guarded.call(
            "POST",
            "/v1/queues/q/messages",
            {"messages": [{"body": 1}, {"body": 2, "target": {"type": "http", "url": url}}]},
        )
        for url in BAD
    }
    accepted = [url for url, (status, _) in answers.items() if status != 400]
    unnamed = [url for url, (_, doc) in answers.items() if not doc["error"]["message"].startswith("messages[1].target")]
    assert (accepted, unnamed, table_items(guarded), guarded.timers()) == ([], [], before, [])


def test_later_callback_that_is_private_or_not_http_is_refused(guarded: Harness) -> None:
    task = {"topic": "t", "delay": 1, "content": "c"}
    answers = {url: guarded.call("POST", "/create", {**task, "callback": url}) for url in BAD}
    accepted = [url for url, (status, _) in answers.items() if status != 400]
    unnamed = [url for url, (_, doc) in answers.items() if not doc["error"]["message"].startswith("callback")]
    assert (accepted, unnamed, table_items(guarded)) == ([], [], 0)


def test_public_callback_is_accepted(guarded: Harness) -> None:
    status, _ = guarded.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": "https://hooks.example/x"}})
    assert status == 201


def test_name_that_resolves_to_a_private_address_by_delivery_time_is_not_called(
    guarded: Harness, serve: Serve, names: FakeDns
) -> None:
    server = serve(answer(200))
    url = f"http://hooks.example:{server.port}/hook"
    assert guarded.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": url}})[0] == 201
    _, doc = guarded.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})
    names.answers["hooks.example"] = ["127.0.0.1"]  # DNS rebinding: the name now points at the host itself
    guarded.dispatch(guarded.timers())
    message = guarded.ctx.store.get_message("q", doc["messages"][0]["id"])
    assert server.seen == []
    assert message is not None and "private or reserved" in (message.last_error or "")


def test_connection_goes_to_the_checked_address_with_the_url_host(serve: Serve, names: FakeDns) -> None:
    server = serve(answer(204))
    names.answers["pinned.example"] = ["127.0.0.1"]
    reply = http_target.post(f"http://pinned.example:{server.port}/p?q=1", b"{}", {}, allow_private=True)
    assert reply.status == 204
    assert [(s.path, s.host) for s in server.seen] == [("/p?q=1", f"pinned.example:{server.port}")]


def open_harness(h: Harness) -> Harness:
    """Loopback allowed (the callback servers here are local), the real HTTP adapter."""
    h.ctx.settings = replace(h.ctx.settings, allow_private_callbacks=True)
    h.ctx.post = http_target.post
    return h


def test_redirect_is_not_followed_and_fails_the_message_for_good(harness: Harness, serve: Serve) -> None:
    elsewhere = serve(answer(200))
    redirecting = serve(answer(302, headers={"Location": elsewhere.url("/stolen")}))
    h = open_harness(harness)
    h.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": redirecting.url()}})
    [created] = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})[1]["messages"]
    h.dispatch(h.timers())
    later = h.timers()
    doc = h.call("GET", f"/v1/queues/q/messages/{created['id']}")[1]
    assert (doc["status"], doc["last_error"], doc["attempts"]) == ("failed", "HTTP 302", 1)
    assert (elsewhere.seen, later) == ([], [])


def test_a_bad_status_line_is_stored_without_its_control_characters(harness: Harness, serve: Serve) -> None:
    def bad_status_line(handler: Any) -> None:
        handler.wfile.write(b"\x1b]0;owned\x07\x1b[2J" + b"x" * 2000 + b"\r\n\r\n")

    h = open_harness(harness)
    h.call("PUT", "/v1/queues/q", {"target": {"type": "http", "url": serve(bad_status_line).url()}})
    [created] = h.call("POST", "/v1/queues/q/messages", {"messages": [{"body": 1}]})[1]["messages"]
    h.dispatch(h.timers())
    error = h.call("GET", f"/v1/queues/q/messages/{created['id']}")[1]["last_error"]
    assert error.startswith("BadStatusLine: \\x1b]0;owned\\x07\\x1b[2Jxxx")
    assert len(error) <= 500 and error.isprintable()


def test_callback_that_never_answers_times_out(serve: Serve) -> None:
    server = serve(silent)
    started = time.monotonic()
    with pytest.raises(OSError):
        http_target.post(server.url(), b"{}", {}, allow_private=True, connect_timeout=1, read_timeout=0.5)
    assert time.monotonic() - started < 3


def test_callback_that_drips_its_answer_is_cut_off(serve: Serve) -> None:
    server = serve(drip)
    started = time.monotonic()
    try:
        reply: Any = http_target.post(server.url(), b"{}", {}, allow_private=True, connect_timeout=1, read_timeout=1)
    except (OSError, http_target.http.client.HTTPException):
        reply = None
    assert time.monotonic() - started < 4
    assert reply is None or len(reply.body) < 100


def test_huge_answer_is_read_only_up_to_the_limit(serve: Serve) -> None:
    server = serve(answer(200, body=b"x" * (8 * 1024 * 1024)))
    reply = http_target.post(server.url(), b"{}", {}, allow_private=True)
    assert (reply.status, len(reply.body)) == (200, http_target.MAX_RESPONSE)


def test_private_address_is_refused_by_the_adapter_itself() -> None:
    with pytest.raises(ValidationError, match="private or reserved"):
        http_target.post("http://127.0.0.1:9/hook", b"{}", {}, allow_private=False)
