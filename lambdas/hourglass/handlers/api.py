"""Ingest Lambda: API Gateway proxy events in, REST responses out."""

from __future__ import annotations

import base64
from functools import cache
from typing import Any

from hourglass import console
from hourglass.adapters.fanout_invoker import FanoutInvoker
from hourglass.service.context import Context
from hourglass.service.rest import Api, Request
from hourglass.settings import Settings


@cache
def _api() -> Api:
    settings = Settings.from_env()
    # Bulk operations run in the sweeper function, invoked asynchronously (one invocation per segment group).
    invoke = FanoutInvoker(settings.sweeper_function).invoke if settings.sweeper_function else None
    return Api(Context.from_settings(settings, invoke_fanout=invoke))


def request_of(event: dict[str, Any]) -> Request:
    """An API Gateway proxy event as the API's request."""
    body = event.get("body")
    raw: bytes | None = None
    if body is not None:
        raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8", "surrogatepass")
    return Request(
        method=str(event.get("httpMethod", "GET")).upper(),
        path=str(event.get("path") or "/"),
        params={str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()},
        headers={str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()},
        raw_body=raw,
    )


def handle(api: Api, event: dict[str, Any]) -> dict[str, Any]:
    request = request_of(event)
    page = console.serve(request.method, request.path)
    if page is not None:
        return page
    try:
        return api.handle(request)
    finally:
        api.ctx.metrics.flush()


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return handle(_api(), event)
