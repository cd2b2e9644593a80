"""Ingest Lambda: API Gateway proxy events in, REST responses out."""

from __future__ import annotations

from functools import cache
from typing import Any

from hourglass import console
from hourglass.service.api import Api, Request
from hourglass.service.context import Context
from hourglass.settings import Settings


@cache
def _api() -> Api:
    return Api(Context.from_settings(Settings.from_env()))


def handle(api: Api, event: dict[str, Any]) -> dict[str, Any]:
    request = Request.from_event(event)
    page = console.serve(request.method, request.path)
    if page is not None:
        return page
    try:
        return api.handle(request)
    finally:
        api.ctx.metrics.flush()


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return handle(_api(), event)
