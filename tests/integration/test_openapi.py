"""The OpenAPI document matches the REST handler: same routes, and real responses fit its schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from tests.integration.conftest import Harness

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml").read_text())


def resolve(node: Any) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = SPEC
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return resolve(target)
        return {key: resolve(value) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(item) for item in node]
    return node


def response_schema(path: str, method: str, status: int) -> dict[str, Any]:
    response = resolve(SPEC["paths"][path][method.lower()]["responses"][str(status)])
    return dict(response["content"]["application/json"]["schema"])


def check(path: str, method: str, status: int, doc: Any) -> None:
    OAS30Validator(response_schema(path, method, status)).validate(doc)


def handler_routes(harness: Harness) -> set[tuple[str, str]]:
    routes = set()
    for method, pattern, _ in harness.api.routes:
        template = pattern.pattern.strip("^$").removesuffix("/?")
        template = template.replace("([^/]+)", "{queue}", 1).replace("([^/]+)", "{id}", 1).replace("(.*)", "{id}")
        routes.add((method, template))
    return routes


def test_document_is_valid_openapi() -> None:
    validate(SPEC)


def test_document_and_handler_have_the_same_routes(harness: Harness) -> None:
    documented = {
        (method.upper(), path) for path, item in SPEC["paths"].items() for method in item if method != "parameters"
    }
    assert documented == handler_routes(harness)


@pytest.fixture
def queue(harness: Harness) -> str:
    status, doc = harness.call("PUT", "/v1/queues/orders", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}})
    check("/v1/queues/{queue}", "PUT", status, doc)
    return "orders"


def test_queue_document_fits_the_schema(harness: Harness, queue: str) -> None:
    status, doc = harness.call("GET", f"/v1/queues/{queue}")
    check("/v1/queues/{queue}", "GET", status, doc)


def test_created_and_message_documents_fit_the_schema(harness: Harness, queue: str) -> None:
    status, created = harness.call(
        "POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": {"a": 1}, "ttl": 60}]}
    )
    check("/v1/queues/{queue}/messages", "POST", status, created)
    message_id = created["messages"][0]["id"]
    status, doc = harness.call("GET", f"/v1/queues/{queue}/messages/{message_id}")
    check("/v1/queues/{queue}/messages/{id}", "GET", status, doc)


def test_list_page_fits_the_schema(harness: Harness, queue: str) -> None:
    harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}, {"body": 2}]})
    status, page = harness.call("GET", f"/v1/queues/{queue}/messages", params={"limit": "1"})
    check("/v1/queues/{queue}/messages", "GET", status, page)


def test_error_document_fits_the_schema(harness: Harness, queue: str) -> None:
    status, doc = harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": []})
    check("/v1/queues/{queue}/messages", "POST", status, doc)


def test_later_query_fits_the_schema(harness: Harness) -> None:
    task = {"topic": "t", "delay": 5, "retry": 1, "callback": "http://127.0.0.1:9/", "content": "x"}
    status, created = harness.call("POST", "/create", task)
    check("/create", "POST", status, created)
    status, doc = harness.call("POST", "/query", {"id": created["id"]})
    check("/query", "POST", status, doc)


def test_operation_document_fits_the_schema(harness: Harness, queue: str) -> None:
    status, started = harness.call("POST", f"/v1/queues/{queue}/operations", {"action": "shift", "seconds": 60})
    check("/v1/queues/{queue}/operations", "POST", status, started)
    status, doc = harness.call("GET", f"/v1/queues/{queue}/operations/{started['id']}")
    check("/v1/queues/{queue}/operations/{id}", "GET", status, doc)


def test_pause_and_resume_fit_the_schema(harness: Harness, queue: str) -> None:
    for action in ("pause", "resume"):
        status, doc = harness.call("POST", f"/v1/queues/{queue}/{action}")
        check(f"/v1/queues/{{queue}}/{action}", "POST", status, doc)


def test_attempts_and_redeliver_fit_the_schema(harness: Harness, queue: str) -> None:
    _, created = harness.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]})
    message_id = created["messages"][0]["id"]
    harness.dispatch(harness.timers())
    status, doc = harness.call("GET", f"/v1/queues/{queue}/messages/{message_id}/attempts")
    check("/v1/queues/{queue}/messages/{id}/attempts", "GET", status, doc)
    status, doc = harness.call("POST", f"/v1/queues/{queue}/messages/{message_id}/redeliver")
    check("/v1/queues/{queue}/messages/{id}/redeliver", "POST", status, doc)


def test_queue_list_fits_the_schema(harness: Harness, queue: str) -> None:
    status, page = harness.call("GET", "/v1/queues", params={"limit": "1"})
    check("/v1/queues", "GET", status, page)


def test_documents_with_windows_fit_the_schema(harness: Harness, queue: str) -> None:
    window = {"timezone": "Europe/Paris", "days": ["mon"], "from": "09:00", "to": "18:00", "exclude_dates": []}
    status, doc = harness.call("PUT", f"/v1/queues/{queue}", {"window": window})
    check("/v1/queues/{queue}", "PUT", status, doc)
    request = {"messages": [{"body": 1, "window": window}]}
    status, created = harness.call("POST", f"/v1/queues/{queue}/messages", request)
    status, doc = harness.call("GET", f"/v1/queues/{queue}/messages/{created['messages'][0]['id']}")
    check("/v1/queues/{queue}/messages/{id}", "GET", status, doc)
    status, doc = harness.call("PUT", f"/v1/queues/{queue}/schedules/s", {"every": 3600, "body": 1, "window": window})
    check("/v1/queues/{queue}/schedules/{id}", "PUT", status, doc)


def test_ordered_keys_and_their_messages_fit_the_schema(harness: Harness) -> None:
    ordered = {"target": {"type": "http", "url": "http://127.0.0.1:9/"}, "ordering": {"by": "flow_key"}}
    status, doc = harness.call("PUT", "/v1/queues/orders", ordered)
    check("/v1/queues/{queue}", "PUT", status, doc)
    _, created = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "flow_key": "a/b"}]})
    status, doc = harness.call("GET", f"/v1/queues/orders/messages/{created['messages'][0]['id']}")
    check("/v1/queues/{queue}/messages/{id}", "GET", status, doc)
    status, doc = harness.call("GET", "/v1/queues/orders/keys/a%2Fb")
    check("/v1/queues/{queue}/keys/{id}", "GET", status, doc)
    assert doc["flow_key"] == "a/b"
    status, doc = harness.call("POST", "/v1/queues/orders/keys/a%2Fb/release")
    check("/v1/queues/{queue}/keys/{id}/release", "POST", status, doc)
