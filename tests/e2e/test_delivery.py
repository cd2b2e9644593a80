"""End to end through each mode (in-process runtime, deployed stack): REST in, SQS and HTTP out, on time."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from hourglass.version import __version__

from tests.e2e.conftest import Client, Receiver, Stack, record_lateness

# Delivery must never be early; lateness this large would mean something is broken.
LATE_LIMIT = 1.5


def due_epoch(doc: dict[str, Any]) -> float:
    return datetime.fromisoformat(doc["due_at"].replace("Z", "+00:00")).timestamp()


def http_queue(api: Client, receiver: Receiver, path: str, **settings: Any) -> str:
    name = f"q{uuid.uuid4().hex[:10]}"
    target = {"type": "http", "url": receiver.url(path)}
    status, _ = api.call("PUT", f"/v1/queues/{name}", {"target": target, **settings})
    assert status == 201
    return name


def settled(api: Client, queue: str, message_id: str, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """The message once its outcome is written: the receiver sees a delivery before the dispatcher
    records it (attempt history, then the status), so a GET right after may still say `delivering`."""
    deadline = time.monotonic() + timeout
    while True:
        status, doc = api.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
        if status != 200 or doc["status"] != "delivering" or time.monotonic() > deadline:
            return status, doc
        time.sleep(0.1)


def post(api: Client, queue: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    status, doc = api.call("POST", f"/v1/queues/{queue}/messages", {"messages": list(messages)})
    assert status == 201, doc
    return list(doc["messages"])


def assert_on_time(stack: Stack, received_at: float, due: float) -> None:
    lateness = received_at - due
    record_lateness(stack.mode, lateness)
    assert 0 <= lateness < LATE_LIMIT, f"lateness {lateness:.3f} s"


def test_handed_off_message_reaches_the_http_target_on_time(api: Client, receiver: Receiver, stack: Stack) -> None:
    queue = http_queue(api, receiver, "/handoff")
    [created] = post(api, queue, {"body": {"kind": "handoff"}, "delay": 2})
    [got] = receiver.wait_for("/handoff")
    assert got.body == {"kind": "handoff"} and got.headers["Hourglass-Message-Id"] == created["id"]
    assert_on_time(stack, got.at, due_epoch(created))


def test_swept_message_reaches_the_http_target_on_time(api: Client, receiver: Receiver, stack: Stack) -> None:
    queue = http_queue(api, receiver, "/swept")
    [created] = post(api, queue, {"body": "swept", "delay": stack.swept_delay})
    _, stored = api.call("GET", f"/v1/queues/{queue}/messages/{created['id']}")
    [got] = receiver.wait_for("/swept", timeout=stack.swept_timeout)
    status, doc = settled(api, queue, created["id"])
    assert stored["status"] == "pending"
    assert (status, doc["status"]) == (200, "delivered")
    assert_on_time(stack, got.at, due_epoch(created))


def test_message_reaches_the_sqs_target_on_time(api: Client, stack: Stack) -> None:
    sqs = stack.client("sqs")
    target = sqs.create_queue(QueueName=f"target-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    name = f"q{uuid.uuid4().hex[:10]}"
    api.call("PUT", f"/v1/queues/{name}", {"target": {"type": "sqs", "queue_url": target}})
    [created] = post(api, name, {"body": {"to": "sqs"}, "delay": 2})
    deadline = time.time() + 20
    messages: list[dict[str, Any]] = []
    while not messages and time.time() < deadline:
        got = sqs.receive_message(QueueUrl=target, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"])
        messages = got.get("Messages", [])
    [message] = messages
    assert json.loads(message["Body"])["body"] == {"to": "sqs"}
    assert_on_time(stack, int(message["Attributes"]["SentTimestamp"]) / 1000, due_epoch(created))


def test_cancel_before_due_means_no_delivery(api: Client, receiver: Receiver) -> None:
    queue = http_queue(api, receiver, "/cancelled")
    [created] = post(api, queue, {"body": 1, "delay": 2})
    status, _ = api.call("DELETE", f"/v1/queues/{queue}/messages/{created['id']}")
    time.sleep(4)
    assert status == 204
    assert receiver.wait_for("/cancelled", timeout=0.1) == []


def test_reschedule_moves_delivery(api: Client, receiver: Receiver, stack: Stack) -> None:
    queue = http_queue(api, receiver, "/moved")
    [created] = post(api, queue, {"body": 1, "delay": 2})
    status, patched = api.call("PATCH", f"/v1/queues/{queue}/messages/{created['id']}", {"delay": 5})
    got = receiver.wait_for("/moved", timeout=15)
    time.sleep(1)
    assert status == 200 and len(receiver.wait_for("/moved", timeout=0.1)) == 1
    assert_on_time(stack, got[0].at, due_epoch(patched))


def test_retries_follow_the_backoff(api: Client, receiver: Receiver) -> None:
    receiver.script["/flaky"] = [503, 503]
    queue = http_queue(api, receiver, "/flaky", retry={"max_attempts": 3, "backoff_base": 1, "backoff_max": 10})
    [created] = post(api, queue, {"body": 1, "delay": 1})
    attempts = receiver.wait_for("/flaky", count=3, timeout=20)
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    _, doc = settled(api, queue, created["id"])
    assert [a.headers["Hourglass-Attempt"] for a in attempts] == ["1", "2", "3"]
    assert 1.0 <= gaps[0] < 1.1 + LATE_LIMIT and 2.0 <= gaps[1] < 2.2 + LATE_LIMIT
    assert (doc["status"], doc["attempts"]) == ("delivered", 3)


def test_later_endpoints_create_query_and_call_back(api: Client, receiver: Receiver) -> None:
    task = {"topic": "order", "delay": 1, "retry": 2, "callback": receiver.url("/later"), "content": "hello"}
    status, created = api.call("POST", "/create", task)
    _, queried = api.call("POST", "/query", {"id": created["id"]})
    [got] = receiver.wait_for("/later")
    assert status == 200
    assert (queried["topic"], queried["max_retry"], queried["content"]) == ("order", 2, "hello")
    assert got.body == {"id": created["id"], "topic": "order", "content": "hello"}


def test_later_delete_stops_the_callback(api: Client, receiver: Receiver) -> None:
    task = {"topic": "t", "delay": 2, "retry": 0, "callback": receiver.url("/later-deleted"), "content": "x"}
    _, created = api.call("POST", "/create", task)
    status, body = api.call("POST", "/delete", {"id": created["id"]})
    time.sleep(3.5)
    assert (status, body) == (200, {})
    assert receiver.wait_for("/later-deleted", timeout=0.1) == []


def test_bad_request_gets_a_4xx_naming_the_field(api: Client, receiver: Receiver) -> None:
    queue = http_queue(api, receiver, "/bad")
    status, doc = api.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1, "delay": -5}]})
    assert status == 400
    assert "messages[0].delay" in doc["error"]["message"]


def test_body_that_is_not_json_is_a_400(api: Client, receiver: Receiver) -> None:
    queue = http_queue(api, receiver, "/notjson")
    status, doc = api.call("POST", f"/v1/queues/{queue}/messages", raw=b"{not json")
    assert (status, doc["error"]["code"]) == (400, "invalid_request")


def test_health_reports_ok(api: Client) -> None:
    assert api.call("GET", "/health") == (200, {"status": "ok", "version": __version__})


def test_a_wrong_api_key_is_refused(api: Client) -> None:
    status, _ = api.call(
        "PUT", "/v1/queues/refused", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}}, api_key="not-the-key"
    )
    assert status == 403
    assert api.call("GET", "/v1/queues/refused")[0] == 404


def test_large_bodies_are_delivered_intact(api: Client, receiver: Receiver, stack: Stack) -> None:
    queue = http_queue(api, receiver, "/large")
    bodies = [{"size": size, "text": "é" + "x" * size} for size in (64 * 1024, 200 * 1024)]
    created = [post(api, queue, {"body": body, "delay": 2})[0] for body in bodies]
    got = receiver.wait_for("/large", count=2, timeout=20)
    bucket = stack.outputs.get("BodyBucketName")
    kept = stack.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount", 0) if bucket else 0
    assert sorted((g.body for g in got), key=lambda b: b["size"]) == bodies
    assert kept >= len(created)


def test_schedules_in_local_time_resolve_inside_the_functions(api: Client, receiver: Receiver, stack: Stack) -> None:
    """Deployed, the functions find zone data only in their asset (the emulator's Python has no tzdata)."""
    queue = http_queue(api, receiver, "/scheduled")
    weekdays = {"cron": "0 9 * * MON-FRI", "timezone": "Europe/London", "body": {"report": "daily"}}
    status, daily = api.call("PUT", f"/v1/queues/{queue}/schedules/daily", weekdays)
    london = ZoneInfo("Europe/London")
    now = datetime.now(london)
    days = (now.date() + timedelta(days=k) for k in range(10))
    nine = (datetime.combine(d, datetime.min.time().replace(hour=9), london) for d in days if d.weekday() < 5)
    expected = [t.astimezone(UTC) for t in nine if t > now][:3]
    [one_off] = post(api, queue, {"body": "local", "deliver_at": "2027-03-28T09:00:00", "timezone": "Europe/London"})
    start = datetime.fromtimestamp(round(time.time()) + 3, UTC)
    every = {"every": 60, "timezone": "Australia/Lord_Howe", "start_at": start.isoformat(), "body": {"tick": 1}}
    assert api.call("PUT", f"/v1/queues/{queue}/schedules/tick", every)[0] == 201
    [got] = receiver.wait_for("/scheduled", timeout=stack.swept_timeout)
    assert status == 201
    assert [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in daily["next_due_at"]] == expected
    assert one_off["due_at"] == "2027-03-28T08:00:00.000Z"  # 09:00 BST, the day the clocks go forward
    assert (got.body, got.headers["Hourglass-Schedule"]) == ({"tick": 1}, "tick")
    assert_on_time(stack, got.at, start.timestamp())
