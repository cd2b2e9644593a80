"""Fuzz through delivery (issue 10): what the API accepts, run by the real dispatcher to loopback HTTP receivers
and SQS queues, ends delivered, failed with a reason, or expired; none stays `delivering`, none is changed by
its batch-mates. `HOURGLASS_DELIVERY_FUZZ_EXAMPLES` sets the number of examples (longer runs: `make soak`)."""

from __future__ import annotations

import json
import os
import random
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import boto3
import hourglass_client
import pytest
from hourglass.adapters import http_target
from hourglass.adapters.body_store import BodyStore
from hourglass.core import limits
from hourglass.core.timestamps import from_ms
from hourglass.service.dead_letters import DeadLetters
from hourglass.service.dispatch import Dispatcher
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FakeClock
from tests.integration.conftest import Harness, harness_for

EXAMPLES = int(os.environ.get("HOURGLASS_DELIVERY_FUZZ_EXAMPLES", "20"))
# `make test` runs a fixed set of examples (the same every run); a longer run (`make soak`) explores anew.
DERANDOMIZE = "HOURGLASS_DELIVERY_FUZZ_EXAMPLES" not in os.environ
# SQS hands a Lambda at most 10 records per batch; timers of different messages share each one.
BATCH = 10
# Simulated time after the latest due time by which every message must have ended: what a stuck timer
# takes to reach the DLQ (its 10 receives, each after a visibility timeout longer than the lease) is more.
BOUND = timedelta(minutes=15)
VISIBILITY = timedelta(seconds=130)
MAX_RECEIVES = 10
FINAL = ("delivered", "failed", "expired")
# Counted across examples for the summary line (tests/fuzz/conftest.py).
COUNTS: Counter[str] = Counter()

# What each loopback receiver answers: (status of attempt 1, 2, ...); the last one repeats.
ANSWERS = {"ok": (200,), "flaky": (503, 200), "down": (500,), "gone": (404,), "moved": (302,)}


class Listening(ThreadingHTTPServer):
    # a whole batch may connect at once: no connection may wait on a full backlog
    request_queue_size = 128


@dataclass
class Receivers:
    """One loopback HTTP server per behaviour (plus a closed port), recording every request by message id."""

    servers: dict[str, ThreadingHTTPServer] = field(default_factory=dict)
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed_port: int = 0

    def start(self) -> Receivers:
        receivers = self
        for behaviour, answers in ANSWERS.items():

            class Handler(BaseHTTPRequestHandler):
                script = answers

                def do_POST(self) -> None:
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    message_id = str(self.headers.get("Hourglass-Message-Id"))
                    with receivers.lock:
                        got = receivers.seen.setdefault(message_id, [])
                        status = self.script[min(len(got), len(self.script) - 1)]
                        got.append(
                            {"path": self.path, "headers": dict(self.headers.items()), "body": body, "status": status}
                        )
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")

                def log_message(self, *args: Any) -> None:
                    return

            server = Listening(("127.0.0.1", 0), Handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, name="loopback", daemon=True).start()
            self.servers[behaviour] = server
        with socket.socket() as probe:  # a port nothing listens on: connection refused
            probe.bind(("127.0.0.1", 0))
            self.closed_port = probe.getsockname()[1]
        return self

    def port(self, behaviour: str) -> int:
        return self.closed_port if behaviour == "refused" else int(self.servers[behaviour].server_address[1])

    def stop(self) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()


def loopback_dns(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """Every name (IDNA-encoded ones included) resolves to 127.0.0.1, where the receivers listen."""
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


@dataclass
class World:
    harness: Harness
    receivers: Receivers
    sqs_urls: dict[str, str]
    examples: int = 0


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    receivers = Receivers().start()
    with pytest.MonkeyPatch.context() as patch, harness_for(FakeClock()) as harness:
        patch.setattr(http_target.socket, "getaddrinfo", loopback_dns)
        ctx = harness.ctx
        ctx.post = http_target.post
        ctx.check_url = http_target.check_url
        # Large bodies go to S3 as in the stack (the harness has no bucket of its own).
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bodies")
        ctx.store.configure_bodies(
            retention=timedelta(days=ctx.settings.retention_days), body_store=BodyStore("bodies", client=s3)
        )
        ctx.settings = replace(ctx.settings, delivery_lease=120.0)
        urls = {
            "sqs": harness.sqs.create_queue(QueueName="target-std")["QueueUrl"],
            "fifo": harness.sqs.create_queue(QueueName="target-fifo.fifo", Attributes={"FifoQueue": "true"})[
                "QueueUrl"
            ],
        }
        urls["sqs-missing"] = urls["sqs"].rsplit("/", 1)[0] + "/target-missing"
        yield World(harness, receivers, urls)
    receivers.stop()


# strategies ---------------------------------------------------------------------------------

unicode_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24)
# Mostly what the API accepts, sometimes not (control characters, spaces): the refusals are counted.
url_text = st.one_of(
    *[st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), max_size=24)]
    * 4,
    unicode_text,
)
hosts = st.one_of(
    st.just("127.0.0.1"),
    st.sampled_from(["localhost", "bücher.example", "例え.テスト", "straße.de", "xn--bcher-kva.example"]),
    # No URL delimiters: "a#b" or "a/b" as a host makes the URL end its authority early, so the service
    # (rightly) connects to port 80, not to the receiver the example meant (the cause of the refused
    # connections one random run once saw).
    st.lists(
        st.text(
            alphabet=st.characters(
                codec="utf-8", exclude_categories=("Cs", "Zs", "Cc"), exclude_characters="/?#@:[]\\"
            ),
            min_size=1,
            max_size=10,
        ),
        min_size=1,
        max_size=3,
    ).map(".".join),
)
# Visible Latin-1, spaces and tabs (what HTTP carries), or anything up to the euro sign.
latin1 = st.sampled_from([chr(c) for c in [9, *range(0x20, 0x7F), *range(0xA1, 0x100)] if c != 0xAD])
header_values = st.one_of(*[st.text(alphabet=latin1, max_size=30)] * 4, st.text(max_size=10))
header_names = st.sampled_from(["X-Tag", "X-Trace-Id", "Authorization"] * 4 + ["X-Été"])
headers = st.dictionaries(header_names, header_values, max_size=3)
small_bodies = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | unicode_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(unicode_text, children, max_size=4),
    max_leaves=12,
)
# (size in bytes of the serialized body, or "limit": exactly the most the target allows; fill character)
sized_bodies = st.tuples(st.sampled_from([0, 1023, 6 * 1024 + 1, 64 * 1024, "limit"]), st.sampled_from("aé€𝄞"))


@st.composite
def message_specs(draw: st.DrawFn) -> dict[str, Any]:
    route = draw(
        st.sampled_from(["queue", "ok", "flaky", "down", "gone", "moved", "refused", "sqs", "fifo", "sqs-missing"])
    )
    spec: dict[str, Any] = {"route": route}
    if route not in ("queue", "sqs", "fifo", "sqs-missing"):
        spec.update(host=draw(hosts), path=draw(url_text), query=draw(url_text), headers=draw(headers))
    spec["body"] = draw(st.one_of(small_bodies, sized_bodies.map(lambda s: {"sized": s})))
    spec["delay"] = draw(st.sampled_from([0, 0.0004, 1.5, 3, 45, 400]))
    spec["ttl"] = draw(st.sampled_from([None, None, None, 0.5, 2, 3600]))
    spec["dedup"] = draw(st.sampled_from([None, None, None, "d1", "d2"]))
    return spec


@st.composite
def queue_specs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "default": draw(st.sampled_from(["ok", "flaky", "down", "sqs", "fifo"])),
        "max_attempts": draw(st.integers(1, 3)),
        "backoff_base": draw(st.sampled_from([0.5, 1, 2])),
        "signing_secret": draw(st.sampled_from([None, "s3cr3t", "ünïcode-secret"])),
    }


# building requests --------------------------------------------------------------------------


def sized(size: int | str, fill: str, limit: int) -> str:
    """A string whose JSON form is exactly `size` bytes (`limit` for "limit"), made of `fill` and ASCII."""
    total = limit if size == "limit" else max(2, int(size))
    room = total - 2  # the quotes
    width = len(fill.encode())
    return fill * (room // width) + "a" * (room % width)


def target_of(world: World, route: str, spec: dict[str, Any]) -> dict[str, Any]:
    if route in world.sqs_urls:
        return {"type": "sqs", "queue_url": world.sqs_urls[route]}
    url = f"http://{spec.get('host', '127.0.0.1')}:{world.receivers.port(route)}/{spec.get('path', '')}"
    if spec.get("query"):
        url += "?" + spec["query"]
    target = {"type": "http", "url": url}
    if spec.get("headers"):
        target["headers"] = spec["headers"]
    return target


def body_of(spec: dict[str, Any], sqs: bool) -> Any:
    body = spec["body"]
    if isinstance(body, dict) and set(body) == {"sized"}:
        size, fill = body["sized"]
        limit = limits.SQS_MESSAGE_BYTES - limits.ENVELOPE_OVERHEAD if sqs else limits.SQS_MESSAGE_BYTES
        return sized(size, fill, limit)
    return body


@dataclass
class Sent:
    """An accepted message and what its own route makes of it, whatever its batch-mates do."""

    id: str
    route: str
    body: Any
    ttl: bool
    max_attempts: int
    signed: str | None

    def allowed(self) -> set[str]:
        ends = {"ok": "delivered", "sqs": "delivered", "fifo": "delivered"}
        if self.route == "flaky":
            wanted = {"delivered" if self.max_attempts >= 2 else "failed"}
        else:
            wanted = {ends.get(self.route, "failed")}
        return wanted | ({"expired"} if self.ttl else set())

    def attempts(self) -> int:
        """Requests the receiver must see when the message did not expire."""
        if self.route in ("down", "refused"):
            return self.max_attempts
        return 2 if self.route == "flaky" and self.max_attempts >= 2 else 1


def create(world: World, queue: str, qspec: dict[str, Any], specs: list[dict[str, Any]]) -> list[Sent]:
    h = world.harness
    settings_doc: dict[str, Any] = {
        "target": target_of(world, qspec["default"], {}),
        "retry": {"max_attempts": qspec["max_attempts"], "backoff_base": qspec["backoff_base"], "backoff_max": 4},
    }
    if qspec["signing_secret"]:
        settings_doc["signing_secret"] = qspec["signing_secret"]
    status, doc = h.call("PUT", f"/v1/queues/{queue}", settings_doc)
    assert status == 201, doc
    sent: dict[str, Sent] = {}
    for spec in specs:
        route = qspec["default"] if spec["route"] == "queue" else spec["route"]
        message: dict[str, Any] = {"body": body_of(spec, route in world.sqs_urls), "delay": spec["delay"]}
        if spec["route"] != "queue":
            message["target"] = target_of(world, route, spec)
        if spec["ttl"] is not None:
            message["ttl"] = spec["ttl"]
        if spec["dedup"]:
            message["dedup_id"] = spec["dedup"]
        status, doc = h.call("POST", f"/v1/queues/{queue}/messages", {"messages": [message]})
        assert status < 500, doc
        if status != 201:
            COUNTS["refused at create"] += 1
            assert doc["error"]["message"], doc
            continue
        [created] = doc["messages"]
        if created["duplicate"]:
            COUNTS["duplicates (dedup_id)"] += 1
            continue
        signed = qspec["signing_secret"] if route not in world.sqs_urls else None
        sent[created["id"]] = Sent(
            created["id"], route, message["body"], spec["ttl"] is not None, qspec["max_attempts"], signed
        )
        COUNTS[f"accepted {'sqs' if route in world.sqs_urls else 'http'}"] += 1
        if route == "fifo":
            COUNTS["accepted fifo"] += 1
        if signed:
            COUNTS["accepted signed"] += 1
        if spec.get("host", "127.0.0.1").isascii() is False:
            COUNTS["accepted IDNA host"] += 1
        if not (spec.get("path", "") + spec.get("query", "")).isascii():
            COUNTS["accepted unicode path/query"] += 1
        if spec.get("headers"):
            COUNTS["accepted with headers"] += 1
        if limits.json_bytes(message["body"]) >= 64 * 1024:
            COUNTS["accepted body >= 64 KiB"] += 1
    return list(sent.values())


# running ------------------------------------------------------------------------------------


def run_until_quiet(world: World, queue: str, rng: random.Random) -> None:
    """Sweeps and dispatches, SQS style, until every message ended or the simulated bound passed: a record
    the dispatcher fails comes back after the visibility timeout, and after MAX_RECEIVES goes to the DLQ
    consumer, as in the stack."""
    h = world.harness
    start = h.clock.now
    redeliver: list[dict[str, Any]] = []
    receives: Counter[str] = Counter()
    while h.clock.now - start <= BOUND * 2:
        h.sweep()
        if redeliver:
            h.clock.advance(VISIBILITY.total_seconds())
        timers = h.timers() + redeliver
        redeliver = []
        if timers:
            rng.shuffle(timers)
            for first in range(0, len(timers), BATCH):
                batch = timers[first : first + BATCH]
                # SQS shows a batch once its latest timer is visible; the dispatcher sleeps to each due time.
                latest = max(from_ms(t["json"]["due"]) for t in batch)
                h.clock.now = max(h.clock.now, latest)
                failed = set(Dispatcher(h.ctx).run_batch([(t["record"], t["body"]) for t in batch]))
                COUNTS["dispatcher batches"] += 1
                COUNTS["records the dispatcher failed"] += len(failed)
                for timer in (t for t in batch if t["record"] in failed):
                    receives[timer["record"]] += 1
                    if receives[timer["record"]] < MAX_RECEIVES:
                        redeliver.append(timer)
                    else:
                        COUNTS["timers dead-lettered"] += 1
                        DeadLetters(h.ctx).run_batch([(timer["record"], timer["body"], MAX_RECEIVES)])
            continue
        if set(statuses(h, queue).values()) <= set(FINAL):
            return
        h.clock.advance(60)


def statuses(h: Harness, queue: str) -> dict[str, str]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/messages", params={"limit": "1000"})
    assert status == 200, doc
    return {m["id"]: m["status"] for m in doc["messages"]}


def status_of(h: Harness, queue: str, message_id: str) -> dict[str, Any]:
    status, doc = h.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
    assert status == 200, doc
    return dict(doc)


def sqs_envelopes(world: World) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    sqs = world.harness.sqs
    for route in ("sqs", "fifo"):
        while True:
            got = sqs.receive_message(QueueUrl=world.sqs_urls[route], MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                break
            for m in got:
                envelope = json.loads(m["Body"])
                out.setdefault(envelope["id"], []).append(envelope)
                sqs.delete_message(QueueUrl=world.sqs_urls[route], ReceiptHandle=m["ReceiptHandle"])
    return out


def check_http(world: World, queue: str, sent: Sent, doc: dict[str, Any]) -> None:
    """What the receiver saw is what was stored: URL, headers, body bytes, signature, attempt count."""
    seen = world.receivers.seen.get(sent.id, [])
    if doc["status"] != "expired":
        assert doc["attempts"] == sent.attempts(), (sent, doc)
        assert len(seen) == (0 if sent.route == "refused" else sent.attempts()), (sent, doc, len(seen))
    target = doc.get("target") or status_queue(world, queue)["target"]
    parts = urlsplit(target["url"])
    expected_path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    for request in seen:
        assert request["path"] == expected_path
        assert request["headers"]["Host"] == parts.netloc
        assert json.loads(request["body"]) == sent.body
        for name, value in (target.get("headers") or {}).items():
            # A field's value is without its surrounding whitespace (RFC 9110 5.5); http.server keeps the trailing.
            assert request["headers"][name].rstrip(" \t") == value.strip(" \t")
        if sent.signed:
            assert hourglass_client.verify(request["headers"], request["body"], sent.signed, now=0, tolerance=10**10)


def status_queue(world: World, queue: str) -> dict[str, Any]:
    status, doc = world.harness.call("GET", f"/v1/queues/{queue}")
    assert status == 200
    return dict(doc)


@settings(
    max_examples=EXAMPLES,
    derandomize=DERANDOMIZE,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(qspec=queue_specs(), specs=st.lists(message_specs(), min_size=1, max_size=10), seed=st.integers(0, 2**16))
def test_every_accepted_message_ends_and_no_batch_mate_is_affected(
    world: World, qspec: dict[str, Any], specs: list[dict[str, Any]], seed: int
) -> None:
    world.examples += 1
    queue = f"fz{world.examples}"
    sent = create(world, queue, qspec, specs)
    started = world.harness.clock.now
    run_until_quiet(world, queue, random.Random(seed))
    assert world.harness.clock.now - started <= BOUND
    envelopes = sqs_envelopes(world)
    h = world.harness
    assert h.ctx.metrics.counts.get("DispatchError", 0) == 0, "the dispatcher crashed on a message"
    for message in sent:
        doc = status_of(h, queue, message.id)
        COUNTS[f"ended {doc['status']}"] += 1
        assert doc["status"] in message.allowed(), (message, doc)
        if doc["status"] == "failed":
            assert doc["last_error"], doc
        if message.route in ("sqs", "fifo") and doc["status"] == "delivered":
            [envelope] = envelopes.get(message.id, [])
            assert (envelope["body"], envelope["queue"]) == (message.body, queue)
        elif message.route not in world.sqs_urls:
            check_http(world, queue, message, doc)
