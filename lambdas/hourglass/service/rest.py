"""The REST API: routes API Gateway proxy events to use cases and errors to status codes."""

from __future__ import annotations

import hmac
import json
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import unquote

from hourglass.adapters import storage
from hourglass.adapters.items import schedule_key
from hourglass.adapters.message_storage import COUNT_FLUSH_SECONDS
from hourglass.adapters.queue_registry import queue_cursor
from hourglass.adapters.table import encode_cursor
from hourglass.core import admission, delivery_control, json_body, limits, validation
from hourglass.core.attempts import history_doc
from hourglass.core.document import control_doc, created_doc, later_doc, message_doc, queue_doc, schedule_doc
from hourglass.core.model import Queue
from hourglass.core.operations import operation_doc
from hourglass.core.recurrence import Schedule
from hourglass.core.timestamps import format_rfc3339
from hourglass.errors import (
    ConflictError,
    HourglassError,
    NewerFormatError,
    NotFoundError,
    StoreError,
    TimerQueueError,
    ValidationError,
)
from hourglass.logs import log
from hourglass.service import charts
from hourglass.service.context import Context
from hourglass.service.control import Control
from hourglass.service.later import Later
from hourglass.service.messages import Messages
from hourglass.service.operations import Operations
from hourglass.service.queues import Queues
from hourglass.service.schedules import Schedules
from hourglass.version import __version__

# The storage this module uses (`adapters.storage`).
StorageUsed = storage.Counters

Response = dict[str, Any]
NAME = r"([^/]+)"
# Empty for the key "" that messages without a flow key share: `keys/` and `keys//release`.
KEY = r"(.*)"
T = TypeVar("T")
# An error message names a field and says what is wrong: never long, but a field name may come from the request.
MAX_ERROR_MESSAGE = 1000
# A record a newer release wrote is refused (503) for this long: a rolling deploy's old instances are gone by then.
NEWER_FORMAT_RETRY_AFTER = 10


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    raw_body: bytes | None

    def json(self) -> Any:
        return json_body.decode(self.raw_body)


def respond(status: int, doc: Any = None) -> Response:
    response: Response = {"statusCode": status, "headers": {"Content-Type": "application/json"}}
    response["body"] = "" if doc is None else json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return response


def error(status: int, code: str, message: str) -> Response:
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[: MAX_ERROR_MESSAGE - 1] + "…"
    return respond(status, {"error": {"code": code, "message": message}})


def fit_page(
    docs: list[Any], items: Sequence[T], cursor: str | None, after: Callable[[T], str]
) -> tuple[list[Any], str | None]:
    """A list page cut to what fits Lambda's response as AWS measures it (contract v1.1: a page may hold fewer
    than `limit`; `next_cursor`, `after` the last one kept, continues it)."""
    count = limits.page_length(docs)
    return (docs, cursor) if count == len(docs) else (docs[:count], after(items[count - 1]))


class Api:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queues = Queues(ctx)
        self.messages = Messages(ctx)
        self.later = Later(ctx, self.messages)
        self.operations = Operations(ctx)
        self.control = Control(ctx, self.messages)
        self.schedules = Schedules(ctx)
        handlers: list[tuple[str, str, Callable[..., Response]]] = [
            ("GET", r"/health", self.health),
            ("GET", r"/v1/queues", self.list_queues),
            ("PUT", rf"/v1/queues/{NAME}", self.put_queue),
            ("GET", rf"/v1/queues/{NAME}", self.get_queue),
            ("DELETE", rf"/v1/queues/{NAME}", self.delete_queue),
            ("POST", rf"/v1/queues/{NAME}/messages", self.create_messages),
            ("GET", rf"/v1/queues/{NAME}/messages", self.list_messages),
            ("GET", rf"/v1/queues/{NAME}/messages/{NAME}", self.get_message),
            ("DELETE", rf"/v1/queues/{NAME}/messages/{NAME}", self.cancel_message),
            ("PATCH", rf"/v1/queues/{NAME}/messages/{NAME}", self.patch_message),
            ("POST", rf"/v1/queues/{NAME}/operations", self.start_operation),
            ("GET", rf"/v1/queues/{NAME}/operations/{NAME}", self.get_operation),
            ("POST", rf"/v1/queues/{NAME}/pause", self.pause_queue),
            ("POST", rf"/v1/queues/{NAME}/resume", self.resume_queue),
            ("GET", rf"/v1/queues/{NAME}/messages/{NAME}/attempts", self.message_attempts),
            ("POST", rf"/v1/queues/{NAME}/messages/{NAME}/redeliver", self.redeliver_message),
            ("POST", rf"/v1/queues/{NAME}/messages/{NAME}/deliver-now", self.deliver_now),
            ("PUT", rf"/v1/queues/{NAME}/schedules/{NAME}", self.put_schedule),
            ("GET", rf"/v1/queues/{NAME}/schedules/{NAME}", self.get_schedule),
            ("DELETE", rf"/v1/queues/{NAME}/schedules/{NAME}", self.delete_schedule),
            ("GET", rf"/v1/queues/{NAME}/schedules", self.list_schedules),
            ("POST", rf"/v1/queues/{NAME}/schedules/{NAME}/pause", self.pause_schedule),
            ("POST", rf"/v1/queues/{NAME}/schedules/{NAME}/resume", self.resume_schedule),
            ("GET", rf"/v1/queues/{NAME}/metrics", self.queue_metrics),
            # A flow key in a path is percent-encoded; a gateway may have decoded a "/" in it.
            ("GET", rf"/v1/queues/{NAME}/keys/{KEY}", self.get_key),
            ("POST", rf"/v1/queues/{NAME}/keys/{KEY}/release", self.release_key),
            ("POST", r"/create", self.later_create),
            ("POST", r"/delete", self.later_delete),
            ("POST", r"/query", self.later_query),
        ]
        self.routes = [(method, re.compile(f"^{pattern}/?$"), fn) for method, pattern, fn in handlers]

    def handle(self, request: Request) -> Response:
        try:
            denied = self._check_key(request)
            if denied:
                return denied
            return within_limit(self._route(request), request)
        except ValidationError as exc:
            status = 413 if exc.code == "too_large" else 400
            return error(status, exc.code, exc.message)
        except NotFoundError as exc:
            return error(404, "not_found", str(exc))
        except ConflictError as exc:
            return error(409, "conflict", str(exc))
        except NewerFormatError as exc:
            # Written by a newer release (docs/upgrades.md, rule 3): left as it is; a newer API instance reads it.
            log("newer_format", error=str(exc), path=request.path)
            refused = error(503, "unavailable", f"{exc.kind} was written by a newer release of Hourglass; retry later")
            refused["headers"]["Retry-After"] = str(NEWER_FORMAT_RETRY_AFTER)
            return refused
        except (StoreError, TimerQueueError) as exc:
            log("dependency_failed", error=str(exc), path=request.path)
            return error(503, "unavailable", "a dependency failed; retry the request")
        except HourglassError as exc:
            log("request_failed", error=str(exc), path=request.path)
            return error(500, "internal_error", "internal error")
        except Exception:
            log("unhandled_error", path=request.path, trace=traceback.format_exc(limit=5))
            return error(500, "internal_error", "internal error")

    def _check_key(self, request: Request) -> Response | None:
        expected = self.ctx.settings.api_key
        if expected is None or request.path.rstrip("/") == "/health":
            return None
        given = request.headers.get("x-api-key")
        if given is None:
            return error(401, "unauthorized", "x-api-key header is required")
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return error(403, "forbidden", "x-api-key is not valid")
        return None

    def _route(self, request: Request) -> Response:
        allowed: list[str] = []
        for method, pattern, fn in self.routes:
            match = pattern.match(request.path)
            if match is None:
                continue
            if method == request.method:
                return fn(request, *match.groups())
            allowed.append(method)
        if allowed:
            answer = error(405, "method_not_allowed", f"{request.method} is not allowed on {request.path}")
            answer["headers"]["Allow"] = ", ".join(allowed)
            return answer
        return error(404, "not_found", f"no route for {request.path}")

    def _queue_doc(self, queue: Queue) -> dict[str, Any]:
        # Counts are added up per dispatcher batch and written every few seconds: as of that long ago at least.
        as_of = self.ctx.clock() - timedelta(seconds=COUNT_FLUSH_SECONDS)
        return full_queue_doc(queue, self.ctx.store.counts(queue), as_of)

    def health(self, request: Request) -> Response:
        return respond(200, {"status": "ok", "version": __version__})

    def put_queue(self, request: Request, name: str) -> Response:
        doc = request.json() if request.raw_body else {}
        queue, created = self.queues.put(name, doc)
        return respond(201 if created else 200, self._queue_doc(queue))

    def list_queues(self, request: Request) -> Response:
        found, cursor = self.queues.list(request.params)
        docs, cursor = fit_page([self._queue_doc(q) for q in found], found, cursor, lambda q: queue_cursor(q.name))
        return respond(200, {"queues": docs, "next_cursor": cursor})

    def get_queue(self, request: Request, name: str) -> Response:
        return respond(200, self._queue_doc(self.queues.get(name)))

    def pause_queue(self, request: Request, name: str) -> Response:
        return respond(200, self._queue_doc(self.control.pause(name)))

    def resume_queue(self, request: Request, name: str) -> Response:
        return respond(200, self._queue_doc(self.control.resume(name)))

    def message_attempts(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)
        before = validation.attempts_cursor(request.params)
        attempts = [a for a in self.control.attempts(name, message_id) if before is None or a.attempt < before]
        docs = history_doc(attempts)["attempts"]
        page = latest_that_fit(docs)
        earlier = str(page[0]["attempt"]) if len(page) < len(docs) else None
        return respond(200, {"attempts": page, "next_cursor": earlier})

    def redeliver_message(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)
        doc = request.json() if request.raw_body else None
        return respond(200, message_doc(self.control.redeliver(name, message_id, doc)))

    def deliver_now(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)  # `@later` is reached only through /create, /delete, /query
        return respond(200, message_doc(self.messages.deliver_now(name, message_id)))

    def delete_queue(self, request: Request, name: str) -> Response:
        self.queues.delete(name)
        return respond(204)

    def create_messages(self, request: Request, name: str) -> Response:
        validation.queue_name(name)
        results = self.messages.create(name, request.json())
        return respond(201, {"messages": [created_doc(m, duplicate) for m, duplicate in results]})

    def list_messages(self, request: Request, name: str) -> Response:
        validation.queue_name(name)
        found, cursor = self.messages.list(name, request.params)
        blocked = self.control.blocked(name, found)
        return respond(200, {"messages": [message_doc(m, blocked.get(m.id)) for m in found], "next_cursor": cursor})

    def get_message(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)  # `@later` is reached only through /create, /delete, /query
        message = self.messages.get(name, message_id)
        return respond(200, message_doc(message, self.control.blocked(name, [message]).get(message.id)))

    def get_key(self, request: Request, name: str, flow_key: str) -> Response:
        return respond(200, self.control.key(name, unquote(flow_key)))

    def release_key(self, request: Request, name: str, flow_key: str) -> Response:
        return respond(200, self.control.release(name, unquote(flow_key)))

    def cancel_message(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)  # `@later` is reached only through /create, /delete, /query
        self.messages.cancel(name, message_id)
        return respond(204)

    def patch_message(self, request: Request, name: str, message_id: str) -> Response:
        validation.queue_name(name)  # `@later` is reached only through /create, /delete, /query
        return respond(200, message_doc(self.messages.patch(name, message_id, request.json())))

    def start_operation(self, request: Request, name: str) -> Response:
        return respond(202, operation_doc(self.operations.start(name, request.json())))

    def get_operation(self, request: Request, name: str, operation_id: str) -> Response:
        return respond(200, operation_doc(self.operations.get(name, operation_id)))

    def put_schedule(self, request: Request, queue: str, name: str) -> Response:
        schedule, created = self.schedules.put(queue, name, request.json())
        return respond(201 if created else 200, self._schedule_doc(schedule, self.ctx.clock()))

    def get_schedule(self, request: Request, queue: str, name: str) -> Response:
        return respond(200, self._schedule_doc(self.schedules.get(queue, name), self.ctx.clock()))

    def delete_schedule(self, request: Request, queue: str, name: str) -> Response:
        self.schedules.delete(queue, name)
        return respond(204)

    def list_schedules(self, request: Request, queue: str) -> Response:
        validation.queue_name(queue)
        found, cursor = self.schedules.list(queue, request.params)
        now = self.ctx.clock()
        owner = self.queues.get(queue)
        docs = [schedule_doc(s, now, admission.plan_window(s, owner)) for s in found]
        docs, cursor = fit_page(docs, found, cursor, lambda s: encode_cursor(schedule_key(s.queue, s.name)))
        return respond(200, {"schedules": docs, "next_cursor": cursor})

    def pause_schedule(self, request: Request, queue: str, name: str) -> Response:
        return respond(200, self._schedule_doc(self.schedules.pause(queue, name), self.ctx.clock()))

    def resume_schedule(self, request: Request, queue: str, name: str) -> Response:
        return respond(200, self._schedule_doc(self.schedules.resume(queue, name), self.ctx.clock()))

    def _schedule_doc(self, schedule: Schedule, now: datetime) -> dict[str, Any]:
        """Its document, `next_due_at` deferred by its occurrences' window (its own, else its queue's)."""
        queue = None if schedule.window is not None else self.queues.get(schedule.queue)
        return schedule_doc(schedule, now, admission.plan_window(schedule, queue))

    def queue_metrics(self, request: Request, name: str) -> Response:
        return respond(200, charts.chart(self.ctx, name, request.params))

    def later_create(self, request: Request) -> Response:
        return respond(200, {"id": self.later.create(request.json()).id})

    def later_delete(self, request: Request) -> Response:
        self.later.delete(request.json())
        return respond(200, {})

    def later_query(self, request: Request) -> Response:
        return respond(200, later_doc(self.later.query(request.json())))


def latest_that_fit(docs: list[Any]) -> list[Any]:
    """The last of `docs` that fit a response (at least one), in their order: the attempt history, which
    redeliveries may grow past what 6 MB holds, answers its most recent entries and a cursor to the earlier."""
    newest_first = docs[::-1]
    return newest_first[: limits.page_length(newest_first)][::-1]


def within_limit(response: Response, request: Request) -> Response:
    """The response, if it fits Lambda's 6 MB as serialized (pages and error messages are cut to fit, and a
    single document is far smaller); else an error, rather than AWS's bare 502."""
    size = limits.proxy_response_bytes(response)
    if size <= limits.LAMBDA_RESPONSE_BYTES:
        return response
    log("response_too_large", path=request.path, bytes=size)
    return error(500, "internal_error", "the response would exceed the 6 MB AWS allows")


def full_queue_doc(queue: Queue, counts: dict[str, int], counts_as_of: datetime | None = None) -> dict[str, Any]:
    """The queue document with its delivery control (v1.1) and its messages' counts by status (v1.2): every
    status change up to `counts_as_of` is in them (later ones may be too)."""
    doc = {**queue_doc(queue), **control_doc(delivery_control.of(queue)), "counts": counts}
    if counts_as_of is not None:
        doc["counts_as_of"] = format_rfc3339(counts_as_of)
    return doc
