"""Hypothesis over the validation core and the API: bad input raises ValidationError (a 4xx) and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hourglass.adapters.items import message_from_item, message_to_item
from hourglass.core import validation
from hourglass.core.admission import admit
from hourglass.core.model import Queue, QueueSettings
from hourglass.errors import ValidationError
from hourglass.handlers import api as api_handler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devstack.gateway import proxy_event
from tests.fuzz.conftest import QUEUE, Target

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
SETTINGS = QueueSettings(max_delay=validation.MAX_HORIZON)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["2026-11-21T10:00:00Z", "9999-12-31T23:59:59+14:00", "0001-01-01T00:00:00Z", "http://x/"])
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
fields = st.sampled_from(
    [
        "body",
        "delay",
        "deliver_at",
        "ttl",
        "dedup_id",
        "target",
        "type",
        "url",
        "headers",
        "queue_url",
        "retry",
        "max_attempts",
        "backoff_base",
        "backoff_max",
        "default_delay",
        "max_delay",
        "signing_secret",
        "topic",
        "callback",
        "content",
        "id",
        "messages",
        "status",
        "limit",
        "cursor",
    ]
)
documents = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(fields | st.text(max_size=5), children, max_size=6)
    ),
    max_leaves=30,
)


def refused_or_accepted(check: Any, *args: Any) -> Any:
    try:
        return check(*args)
    except ValidationError as exc:
        assert exc.message and exc.code in ("invalid_request", "too_large")
        return None


@given(documents)
def test_queue_settings_validate_or_refuse(doc: Any) -> None:
    settings_ = refused_or_accepted(validation.queue_settings, doc)
    if settings_ is not None:
        assert 0 <= settings_.default_delay <= settings_.max_delay <= validation.MAX_HORIZON


@given(documents)
def test_message_batches_validate_or_refuse_and_what_passes_stores(doc: Any) -> None:
    batch = refused_or_accepted(validation.message_batch, doc, SETTINGS, NOW)
    queue = Queue(QUEUE, SETTINGS, NOW)
    for index, request in enumerate(batch or []):
        message = admit(queue, request, NOW, f"id{index}")
        assert message_from_item(message_to_item(message)) == message
        assert validation.body_size(message.body) <= validation.MAX_BODY_BYTES


@given(documents)
def test_patches_later_tasks_and_ids_validate_or_refuse(doc: Any) -> None:
    refused_or_accepted(validation.message_patch, doc, SETTINGS, NOW)
    refused_or_accepted(validation.later_task, doc)
    refused_or_accepted(validation.later_id, doc)


@given(st.dictionaries(fields | st.text(max_size=8), st.text(max_size=30), max_size=4))
def test_list_queries_validate_or_refuse(params: dict[str, str]) -> None:
    refused_or_accepted(validation.list_query, params)


@given(st.binary(max_size=300) | documents.map(lambda d: json.dumps(d).encode()))
def test_request_bodies_decode_to_storable_json_or_are_refused(raw: bytes) -> None:
    value = refused_or_accepted(validation.decode_json, raw)
    if value is not None:
        json.dumps(value, ensure_ascii=False).encode("utf-8")


ROUTES = [
    ("PUT", f"/v1/queues/{QUEUE}"),
    ("PUT", "/v1/queues/other"),
    ("POST", f"/v1/queues/{QUEUE}/messages"),
    ("PATCH", f"/v1/queues/{QUEUE}/messages/MESSAGE"),
    ("DELETE", f"/v1/queues/{QUEUE}/messages/MESSAGE"),
    ("GET", f"/v1/queues/{QUEUE}/messages"),
    ("POST", "/create"),
    ("POST", "/query"),
    ("POST", "/delete"),
]
CASES = {"cases": 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(ROUTES),
    body=st.binary(max_size=200) | documents.map(lambda d: json.dumps(d).encode()),
    query=st.dictionaries(st.sampled_from(["status", "limit", "cursor", "x"]), st.text(max_size=20), max_size=3),
)
def test_api_never_fails_with_a_5xx_and_a_refusal_changes_nothing(
    target: Target, route: tuple[str, str], body: bytes, query: dict[str, str]
) -> None:
    method, path = route
    event = proxy_event(method, path.replace("MESSAGE", target.message_ids[0]), {}, body)
    event["queryStringParameters"] = query or None
    before = target.harness.ddb.scan(TableName="messages")["Items"]
    status = int(api_handler.handle(target.harness.api, event)["statusCode"])
    CASES["cases"] += 1
    assert status < 500
    if status >= 400:
        assert target.harness.ddb.scan(TableName="messages")["Items"] == before
