"""Retries on 429/503: a lossy loopback proxy in front of the real runtime, and a scripted fake server
for what the runtime cannot answer on demand."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

import pytest
from hourglass_client import Client, Conflict, RateLimited, RetryPolicy, Unavailable, message
from hourglass_client.transport import retry_after_seconds

from tests.clients.conftest import API_KEY, scripted
from tests.loopback import QuietHandler, base_url, serve, shut


@dataclass
class Proxy:
    """Forwards to `upstream`; for the first `drop` POSTs it throws the upstream answer away and
    answers 503, as a gateway timing out after the server stored the request would."""

    upstream: str
    drop: int = 0
    posts: list[bytes] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Proxy:
        proxy = self

        class Handler(QuietHandler):
            def _forward(self) -> None:
                raw = self.body()
                request = urllib.request.Request(proxy.upstream + self.path, data=raw or None, method=self.command)
                for name in ("Content-Type", "x-api-key"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, payload = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, payload = exc.code, exc.read()
                if self.command == "POST":
                    proxy.posts.append(raw)
                    if proxy.drop > 0:
                        proxy.drop -= 1
                        status, payload = 503, b'{"error":{"code":"unavailable","message":"lost answer"}}'
                self.answer(status, payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self.server = serve(Handler)
        return self

    @property
    def url(self) -> str:
        return base_url(self.server)


@pytest.fixture
def proxy(api_url: str) -> Iterator[Proxy]:
    started = Proxy(api_url).start()
    yield started
    assert started.server is not None
    shut(started.server)


UNAVAILABLE = {"error": {"code": "unavailable", "message": "retry"}}
THROTTLED = {"error": {"code": "too_many_requests", "message": "slow down"}}


def test_a_create_whose_answer_was_lost_is_stored_once(proxy: Proxy, client: Client, queue: str) -> None:
    proxy.drop = 2
    sleeps: list[float] = []
    lossy = Client(proxy.url, API_KEY, sleep=sleeps.append)
    created = lossy.send_batch(queue, [message({"n": n}, delay=600) for n in range(3)])
    assert len(proxy.posts) == 3  # two lost answers, then the one that came back
    assert len(sleeps) == 2
    assert [c.duplicate for c in created] == [True, True, True]
    stored = list(client.iter_messages(queue))
    assert sorted(m.body["n"] for m in stored) == [0, 1, 2]


def test_a_retried_create_repeats_the_same_dedup_ids() -> None:
    created = {"messages": [{"id": "m1", "due_at": None, "status": "pending", "duplicate": False}]}
    fake = scripted((503, {}, UNAVAILABLE), (429, {}, THROTTLED), (201, {}, created))
    Client(fake.url, sleep=lambda _: None).send("q", "hi")
    ids = [body["messages"][0]["dedup_id"] for _, _, body in fake.requests]
    assert len(ids) == 3 and len(set(ids)) == 1


def test_retry_after_is_waited_at_least() -> None:
    fake = scripted((429, {"Retry-After": "7"}, THROTTLED), (200, {}, {"name": "q"}))
    sleeps: list[float] = []
    Client(fake.url, sleep=sleeps.append).get_queue("q")
    assert len(sleeps) == 1 and 7 <= sleeps[0] <= 8


def test_backoff_grows_with_full_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=8, base=0.5, cap=4.0)
    assert [policy.wait(n, None, lambda: 1.0) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.wait(3, None, lambda: 0.25) == 1.0


def test_503_after_every_retry_raises_unavailable_with_its_code() -> None:
    fake = scripted(*[(503, {}, UNAVAILABLE)] * 3)
    with pytest.raises(Unavailable) as caught:
        Client(fake.url, retry=RetryPolicy(attempts=3), sleep=lambda _: None).get_queue("q")
    assert (caught.value.status, caught.value.code, len(fake.requests)) == (503, "unavailable", 3)


def test_429_after_every_retry_raises_rate_limited() -> None:
    fake = scripted(*[(429, {}, THROTTLED)] * 2)
    with pytest.raises(RateLimited):
        Client(fake.url, retry=RetryPolicy(attempts=2), sleep=lambda _: None).get_queue("q")


def test_redeliver_is_not_repeated_after_a_503() -> None:
    fake = scripted((503, {}, UNAVAILABLE), (409, {}, {"error": {"code": "conflict", "message": "pending"}}))
    with pytest.raises(Unavailable):
        Client(fake.url, sleep=lambda _: None).redeliver("q", "m1")
    assert len(fake.requests) == 1


def test_a_conflict_is_raised_at_once() -> None:
    fake = scripted((409, {}, {"error": {"code": "conflict", "message": "message m1 is delivered"}}))
    with pytest.raises(Conflict) as caught:
        Client(fake.url, sleep=lambda _: None).cancel("q", "m1")
    assert caught.value.message == "message m1 is delivered"


def test_a_create_without_dedup_is_retried_only_when_throttled() -> None:
    fake = scripted((503, {}, UNAVAILABLE))
    with pytest.raises(Unavailable):
        Client(fake.url, auto_dedup=False, sleep=lambda _: None).send("q", "once")
    assert len(fake.requests) == 1


def test_retry_after_as_an_http_date() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    assert retry_after_seconds("Sat, 21 Nov 2026 10:00:30 GMT", now) == 30
    assert retry_after_seconds("soon", now) is None
