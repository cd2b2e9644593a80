"""List pages through the API handler fit Lambda's 6 MB as AWS measures it (the serialized proxy response), where
the raw bodies alone would fit: each message and schedule carries the largest body, in characters that escaping
triples; following `next_cursor` still lists each one once."""

from __future__ import annotations

import json
from typing import Any

from hourglass.core import limits, validation
from hourglass.handlers import api as api_handler

from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue

# 2 bytes a character as stored, 6 (\u00e9) in the proxy response: nine of them are under 6 MB raw, over it escaped.
BODY = "é" * ((validation.MAX_BODY_BYTES - 2) // 2)
COUNT = 9


def get(h: Harness, path: str, params: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    event = {"httpMethod": "GET", "path": path, "queryStringParameters": params, "headers": {}, "body": None}
    response = api_handler.handle(h.api, event)
    return response, json.loads(response["body"])


def every_page(h: Harness, path: str, key: str) -> list[list[str]]:
    pages: list[list[str]] = []
    params = {"limit": "100"}
    while True:
        response, doc = get(h, path, params)
        assert (response["statusCode"], limits.proxy_response_bytes(response) <= limits.LAMBDA_RESPONSE_BYTES) == (
            200,
            True,
        )
        pages.append([item.get("id") or item["name"] for item in doc[key]])
        if doc["next_cursor"] is None:
            return pages
        params = {"limit": "100", "cursor": doc["next_cursor"]}


def test_a_page_of_large_escaped_bodies_fits_and_the_cursor_goes_on(harness: Harness) -> None:
    assert COUNT * limits.json_bytes(BODY) < limits.MAX_PAGE_BYTES < COUNT * limits.document_bytes(BODY)
    make_queue(harness)
    ids = []
    for _ in range(COUNT):
        _, doc = harness.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": BODY, "delay": 600}]})
        ids.append(doc["messages"][0]["id"])
    pages = every_page(harness, "/v1/queues/orders/messages", "messages")
    assert len(pages) > 1
    assert sorted(item for page in pages for item in page) == sorted(ids)


def test_a_page_of_schedules_with_large_escaped_bodies_fits_and_the_cursor_goes_on(harness: Harness) -> None:
    make_queue(harness)
    names = [f"s{n}" for n in range(COUNT)]
    for name in names:
        status, _ = harness.call("PUT", f"/v1/queues/orders/schedules/{name}", {"every": 3600, "body": BODY})
        assert status == 201
    pages = every_page(harness, "/v1/queues/orders/schedules", "schedules")
    assert len(pages) > 1
    assert sorted(item for page in pages for item in page) == names
