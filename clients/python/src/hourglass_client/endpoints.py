"""Every endpoint of the REST contract described once (method, path, parameters, response type), as a `Call`;
`Client` runs each call blocking, `AsyncClient` awaiting (the `endpoint` and `pager` descriptors)."""

from __future__ import annotations

import functools
import inspect
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from hourglass_client import batches
from hourglass_client.message_fields import SchedulePut, message
from hourglass_client.models import (
    Attempt,
    Created,
    KeyState,
    Message,
    Operation,
    Page,
    Queue,
    Schedule,
    format_time,
)
from hourglass_client.queue_settings import QueuePut
from hourglass_client.sigv4 import SigV4Signer
from hourglass_client.transport import RETRY_STATUSES, RetryPolicy, Transport, path

P = ParamSpec("P")
T = TypeVar("T")
THROTTLED_ONLY = frozenset({429})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer; `retry_on` / `retry_transport` say when a repeat is safe."""

    method: str
    route: str
    parse: Callable[[Any], T]
    body: Any = None
    params: Mapping[str, Any] | None = None
    retry_on: frozenset[int] = RETRY_STATUSES
    retry_transport: bool = True

    def run(self, transport: Transport) -> T:
        answer = transport.request(
            self.method,
            self.route,
            body=self.body,
            params=self.params,
            retry_on=self.retry_on,
            retry_transport=self.retry_transport,
        )[1]
        return self.parse(answer)


# A page of a list from its cursor (None: the first page).
Pages = Callable[[str | None], Call[Page[T]]]


class Blocking:
    """A client whose endpoints return their results."""

    def run(self, call: Call[T]) -> T:
        raise NotImplementedError


class Awaiting:
    """A client whose endpoints return awaitables."""

    async def run(self, call: Call[T]) -> T:
        raise NotImplementedError


def _signature(build: Callable[..., Any], bound: Callable[..., Any]) -> None:
    """`bound` documented as `build` without its `self`."""
    functools.update_wrapper(bound, build)
    del bound.__wrapped__  # type: ignore[attr-defined]
    signature = inspect.signature(build)
    bound.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=list(signature.parameters.values())[1:], return_annotation=inspect.Signature.empty
    )


class endpoint(Generic[P, T]):
    """A method from its `Call` builder: blocking on `Client`, awaitable on `AsyncClient`."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.call = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> endpoint[P, T]: ...
    @overload
    def __get__(self, obj: Blocking, owner: type | None = None) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: Awaiting, owner: type | None = None) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Blocking | Awaiting | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        build = self.call
        if isinstance(obj, Awaiting):
            runner = obj

            async def awaited(*args: P.args, **kwargs: P.kwargs) -> T:
                return await runner.run(build(runner, *args, **kwargs))

            _signature(build, awaited)
            return awaited
        blocking = obj

        def bound(*args: P.args, **kwargs: P.kwargs) -> T:
            return blocking.run(build(blocking, *args, **kwargs))

        _signature(build, bound)
        return bound


class pager(Generic[P, T]):
    """An `iter_*` method from its `Pages` builder: an iterator on `Client`, an async one on `AsyncClient`;
    it follows `next_cursor` until the last page."""

    def __init__(self, build: Callable[Concatenate[Any, P], Pages[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> pager[P, T]: ...
    @overload
    def __get__(self, obj: Blocking, owner: type | None = None) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, obj: Awaiting, owner: type | None = None) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, obj: Blocking | Awaiting | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        build = self.build
        if isinstance(obj, Awaiting):
            runner = obj

            def iterate_async(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
                return _async_pages(runner, build(runner, *args, **kwargs))

            _signature(build, iterate_async)
            return iterate_async
        blocking = obj

        def iterate(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
            return _pages(blocking, build(blocking, *args, **kwargs))

        _signature(build, iterate)
        return iterate


def _pages(client: Blocking, fetch: Pages[T]) -> Iterator[T]:
    cursor: str | None = None
    while True:
        page = client.run(fetch(cursor))
        yield from page.items
        if not page.next_cursor or page.next_cursor == cursor:
            return
        cursor = page.next_cursor


async def _async_pages(client: Awaiting, fetch: Pages[T]) -> AsyncIterator[T]:
    cursor: str | None = None
    while True:
        page = await client.run(fetch(cursor))
        for item in page.items:
            yield item
        if not page.next_cursor or page.next_cursor == cursor:
            return
        cursor = page.next_cursor


def new_dedup_id() -> str:
    """A dedup id for a message whose caller gave none, so that a retried POST creates it once."""
    return f"sdk-{uuid.uuid4().hex}"


def _fields(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _when(deliver_at: datetime | str | None) -> str | None:
    return None if deliver_at is None else format_time(deliver_at)


def _queue(doc: Any) -> Queue:
    return Queue.from_doc(doc)


def _message(doc: Any) -> Message:
    return Message.from_doc(doc)


def _schedule(doc: Any) -> Schedule:
    return Schedule.from_doc(doc)


def _operation(doc: Any) -> Operation:
    return Operation.from_doc(doc)


def _key_reader(flow_key: str) -> Callable[[Any], KeyState]:
    return lambda doc: KeyState.from_doc(doc or {}, flow_key)


def _nothing(_: Any) -> None:
    return None


def _queue_page(doc: Any) -> Page[Queue]:
    return Page([Queue.from_doc(q) for q in doc.get("queues", [])], doc.get("next_cursor"))


def _message_page(doc: Any) -> Page[Message]:
    return Page([Message.from_doc(m) for m in doc.get("messages", [])], doc.get("next_cursor"))


def _schedule_page(doc: Any) -> Page[Schedule]:
    return Page([Schedule.from_doc(s) for s in doc.get("schedules", [])], doc.get("next_cursor"))


def _created(doc: Any) -> list[Created]:
    return [Created.from_doc(d) for d in doc["messages"]]


def _attempt_page(doc: Any) -> Page[Attempt]:
    return Page([Attempt.from_doc(a) for a in doc.get("attempts", [])], doc.get("next_cursor"))


def _reversed(call: Call[Page[T]]) -> Call[Page[T]]:
    """The same request, its page's items last first."""

    def parse(doc: Any) -> Page[T]:
        page = call.parse(doc)
        return Page(page.items[::-1], page.next_cursor)

    return replace(call, parse=parse)


def _documented(method: Callable[..., Any], build: Callable[..., Any], positional: int = 1) -> None:
    """`method(client, first, ..., /, *args, **kwargs)` shown with `build`'s parameters after its `positional`
    first ones."""
    signature = inspect.signature(method)
    first = list(signature.parameters.values())[: 1 + positional]
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*first, *inspect.signature(build).parameters.values()]
    )


def _put_queue(build: Callable[P, QueuePut]) -> endpoint[Concatenate[str, P], Queue]:
    """`put_queue(name, **settings)`, its keyword arguments those of `QueuePut` (declared once there)."""

    def put_queue(client: Endpoints, name: str, /, *args: P.args, **kwargs: P.kwargs) -> Call[Queue]:
        """Creates or replaces a queue; settings left None take the server's defaults (`QueueSettings` says
        what each means). `settings` is merged last (a raw document, for fields this SDK does not know yet)."""
        return Call("PUT", path("v1", "queues", name), _queue, body=build(*args, **kwargs).doc())

    _documented(put_queue, build)
    return endpoint(put_queue)


def _send(build: Callable[P, dict[str, Any]]) -> endpoint[Concatenate[str, P], Created]:
    """`send(queue, body, **fields)`, its arguments those of `message` (declared once there)."""

    def send(client: Endpoints, queue: str, /, *args: P.args, **kwargs: P.kwargs) -> Call[Created]:
        """Schedules one message (the arguments of `message`); `flow_key` and `priority` for a queue's flow
        control (v1.2)."""
        entry = client._with_dedup(build(*args, **kwargs))
        return client._create(queue, [entry], lambda doc: _created(doc)[0])

    _documented(send, build)
    return endpoint(send)


def _put_schedule(build: Callable[P, SchedulePut]) -> endpoint[Concatenate[str, str, P], Schedule]:
    """`put_schedule(queue, name, **fields)`, its keyword arguments those of `SchedulePut` (declared once there)."""

    def put_schedule(client: Endpoints, queue: str, name: str, /, *args: P.args, **kwargs: P.kwargs) -> Call[Schedule]:
        """Creates or replaces a recurring schedule (`SchedulePut` says what each field means)."""
        route = path("v1", "queues", queue, "schedules", name)
        return Call("PUT", route, _schedule, body=build(*args, **kwargs).doc())

    _documented(put_schedule, build, positional=2)
    return endpoint(put_schedule)


class Endpoints:
    """The API of both clients. `base_url` and `api_key` default to HOURGLASS_URL and HOURGLASS_API_KEY.
    `auth="iam"` (or HOURGLASS_AUTH=iam) signs every request with AWS SigV4 from the standard credential
    chain, for a stack deployed with `hourglass:auth` `iam` (or `both`, with the key too); `region` defaults
    to the URL's, then the AWS configuration's. Calls that are safe to repeat are retried on 429/503 and
    connection errors; creates are made safe first by giving every message a dedup id (`auto_dedup`)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        auto_dedup: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        auth: str | None = None,
        region: str | None = None,
    ) -> None:
        url = base_url or os.environ.get("HOURGLASS_URL")
        if not url:
            raise ValueError("base_url: give the API's URL or set HOURGLASS_URL")
        key = api_key if api_key is not None else os.environ.get("HOURGLASS_API_KEY") or None
        mode = (auth or os.environ.get("HOURGLASS_AUTH") or "api_key").strip().lower()
        if mode not in ("api_key", "iam"):
            raise ValueError(f"auth: 'api_key' or 'iam', got {mode!r}")
        sign = SigV4Signer(url, region=region) if mode == "iam" else None
        self.transport = Transport(url, key, timeout, retry or RetryPolicy(), sleep=sleep, sign=sign)
        self.auto_dedup = auto_dedup
        self.sleep = sleep

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    def close(self) -> None:
        """Closes the transport: later calls raise RuntimeError."""
        self.transport.close()

    @endpoint
    def health(self) -> Call[dict[str, Any]]:
        return Call("GET", "/health", lambda doc: dict(doc or {}))

    @endpoint
    def server_version(self) -> Call[str | None]:
        """The release the server runs (`GET /health`, contract v1.3); None from a server before 1.3.0."""
        return Call("GET", "/health", _version_of)

    # --- queues -------------------------------------------------------------------------------

    put_queue = _put_queue(QueuePut)

    @endpoint
    def get_queue(self, name: str) -> Call[Queue]:
        return Call("GET", path("v1", "queues", name), _queue)

    @endpoint
    def delete_queue(self, name: str) -> Call[None]:
        return Call("DELETE", path("v1", "queues", name), _nothing)

    @endpoint
    def pause_queue(self, name: str) -> Call[Queue]:
        return Call("POST", path("v1", "queues", name, "pause"), _queue)

    @endpoint
    def resume_queue(self, name: str) -> Call[Queue]:
        return Call("POST", path("v1", "queues", name, "resume"), _queue)

    @endpoint
    def list_queues(self, *, limit: int | None = None, cursor: str | None = None) -> Call[Page[Queue]]:
        """One page of `GET /v1/queues`: queues in name order."""
        return Call("GET", "/v1/queues", _queue_page, params={"limit": limit, "cursor": cursor})

    @pager
    def iter_queues(self, *, page_size: int | None = None) -> Pages[Queue]:
        """Every queue, in name order, page after page."""
        return lambda cursor: Endpoints.list_queues.call(self, limit=page_size, cursor=cursor)

    # --- messages -----------------------------------------------------------------------------

    send = _send(message)

    def _creates(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> Iterator[Call[list[Created]]]:
        """The create requests of `send_batch`: at most 100 messages each, within the API's size limit."""
        for chunk in batches.chunks(self._with_dedup(m) for m in messages):
            yield self._create(queue, chunk, _created)

    def _with_dedup(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        # Chosen before the first try (and before sizing the request): a retry repeats the same ids,
        # so the server stores each once.
        given = dict(entry)
        if self.auto_dedup and given.get("dedup_id") is None:
            given["dedup_id"] = new_dedup_id()
        return given

    @staticmethod
    def _create(queue: str, entries: list[Mapping[str, Any]], parse: Callable[[Any], T]) -> Call[T]:
        """A create request, repeated on 503 and lost connections only when every entry has a dedup id."""
        safe = all(entry.get("dedup_id") for entry in entries)
        return Call(
            "POST",
            path("v1", "queues", queue, "messages"),
            parse,
            body={"messages": entries},
            retry_on=RETRY_STATUSES if safe else THROTTLED_ONLY,
            retry_transport=safe,
        )

    @endpoint
    def get_message(self, queue: str, message_id: str) -> Call[Message]:
        return Call("GET", path("v1", "queues", queue, "messages", message_id), _message)

    @endpoint
    def list_messages(
        self,
        queue: str,
        *,
        status: str | None = None,
        schedule: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        flow_key: str | None = None,
        order: str | None = None,
    ) -> Call[Page[Message]]:
        """One page; `order`: "due" (earliest scheduled first) or "created" (oldest first)."""
        params = {
            "status": status,
            "schedule": schedule,
            "limit": limit,
            "cursor": cursor,
            "order": order,
            "flow_key": flow_key,
        }
        return Call("GET", path("v1", "queues", queue, "messages"), _message_page, params=params)

    @pager
    def iter_messages(
        self,
        queue: str,
        *,
        status: str | None = None,
        schedule: str | None = None,
        page_size: int | None = None,
        order: str | None = None,
        flow_key: str | None = None,
    ) -> Pages[Message]:
        """Every message of the queue (optionally of one status, schedule or flow key, in `order`), page after page."""
        return lambda cursor: Endpoints.list_messages.call(
            self,
            queue,
            status=status,
            schedule=schedule,
            limit=page_size,
            cursor=cursor,
            order=order,
            flow_key=flow_key,
        )

    @endpoint
    def cancel(self, queue: str, message_id: str) -> Call[None]:
        """Cancels a pending message (no error when it is already cancelled; Conflict once it ran)."""
        return Call("DELETE", path("v1", "queues", queue, "messages", message_id), _nothing)

    @endpoint
    def patch(
        self,
        queue: str,
        message_id: str,
        *,
        body: Any = None,
        delay: float | None = None,
        deliver_at: datetime | str | None = None,
        timezone: str | None = None,
    ) -> Call[Message]:
        """Edits or reschedules a pending message. To set the body to JSON null, use `patch_doc`."""
        doc = _fields(body=body, delay=delay, deliver_at=_when(deliver_at), timezone=timezone)
        return Endpoints.patch_doc.call(self, queue, message_id, doc)

    @endpoint
    def patch_doc(self, queue: str, message_id: str, doc: Mapping[str, Any]) -> Call[Message]:
        return Call("PATCH", path("v1", "queues", queue, "messages", message_id), _message, body=dict(doc))

    @endpoint
    def redeliver(
        self, queue: str, message_id: str, *, delay: float | None = None, deliver_at: datetime | str | None = None
    ) -> Call[Message]:
        """Makes a failed, expired or delivered message pending again. Retried only on 429: a
        repeat after a lost answer would be a Conflict, not a second delivery."""
        doc = _fields(delay=delay, deliver_at=_when(deliver_at))
        route = path("v1", "queues", queue, "messages", message_id, "redeliver")
        return Call("POST", route, _message, body=doc or None, retry_on=THROTTLED_ONLY, retry_transport=False)

    @endpoint
    def deliver_now(self, queue: str, message_id: str) -> Call[Message]:
        """Makes a pending message due now (Conflict unless pending); safe to repeat."""
        return Call("POST", path("v1", "queues", queue, "messages", message_id, "deliver-now"), _message)

    @endpoint
    def attempts_page(self, queue: str, message_id: str, *, cursor: str | None = None) -> Call[Page[Attempt]]:
        """One page of the message's attempt history, in attempt order: the latest attempts first, then (with the
        page's `next_cursor`) the ones before them."""
        route = path("v1", "queues", queue, "messages", message_id, "attempts")
        return Call("GET", route, _attempt_page, params=_fields(cursor=cursor) or None)

    @pager
    def iter_attempts(self, queue: str, message_id: str) -> Pages[Attempt]:
        """Every attempt of the message, newest first, page after page (`attempts` gives them all in order)."""
        return lambda cursor: _reversed(Endpoints.attempts_page.call(self, queue, message_id, cursor=cursor))

    # --- flow keys of an ordered queue (v1.3) ------------------------------------------------------

    @endpoint
    def key(self, queue: str, flow_key: str) -> Call[KeyState]:
        """A flow key of a queue with `ordering`: its head, how many messages wait behind it, whether it is held.
        Messages without a flow key share the key "" (any key, "/" included, is percent-encoded in the path)."""
        return Call("GET", path("v1", "queues", queue, "keys", flow_key), _key_reader(flow_key))

    @endpoint
    def release_key(self, queue: str, flow_key: str) -> Call[KeyState]:
        """Releases a key held after a failure (`on_failure: "hold"`) so that its next message may start; the key
        as it is then. NotFound when nothing is held. Retried only on 429: a repeat after a lost answer would be
        a NotFound, or release a key held again since."""
        route = path("v1", "queues", queue, "keys", flow_key, "release")
        return Call("POST", route, _key_reader(flow_key), retry_on=THROTTLED_ONLY, retry_transport=False)

    # --- bulk operations ----------------------------------------------------------------------

    @endpoint
    def start_operation(
        self,
        queue: str,
        action: str,
        *,
        filter: Mapping[str, Any] | None = None,
        seconds: float | None = None,
    ) -> Call[Operation]:
        """Starts a bulk `cancel`, `redeliver` or `shift` (by `seconds`); retried only on 429."""
        doc = {"action": action, "filter": dict(filter or {}), **_fields(seconds=seconds)}
        route = path("v1", "queues", queue, "operations")
        return Call("POST", route, _operation, body=doc, retry_on=THROTTLED_ONLY, retry_transport=False)

    @endpoint
    def get_operation(self, queue: str, operation_id: str) -> Call[Operation]:
        return Call("GET", path("v1", "queues", queue, "operations", operation_id), _operation)

    # --- schedules ----------------------------------------------------------------------------

    put_schedule = _put_schedule(SchedulePut)

    @endpoint
    def get_schedule(self, queue: str, name: str) -> Call[Schedule]:
        return Call("GET", path("v1", "queues", queue, "schedules", name), _schedule)

    @endpoint
    def list_schedules(
        self, queue: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Call[Page[Schedule]]:
        route = path("v1", "queues", queue, "schedules")
        return Call("GET", route, _schedule_page, params={"limit": limit, "cursor": cursor})

    @pager
    def iter_schedules(self, queue: str, *, page_size: int | None = None) -> Pages[Schedule]:
        """Every schedule of the queue, page after page."""
        return lambda cursor: Endpoints.list_schedules.call(self, queue, limit=page_size, cursor=cursor)

    @endpoint
    def delete_schedule(self, queue: str, name: str) -> Call[None]:
        return Call("DELETE", path("v1", "queues", queue, "schedules", name), _nothing)

    @endpoint
    def pause_schedule(self, queue: str, name: str) -> Call[Schedule]:
        return Call("POST", path("v1", "queues", queue, "schedules", name, "pause"), _schedule)

    @endpoint
    def resume_schedule(self, queue: str, name: str) -> Call[Schedule]:
        return Call("POST", path("v1", "queues", queue, "schedules", name, "resume"), _schedule)

    # --- the `later`-compatible endpoints -------------------------------------------------------

    @endpoint
    def later_create(
        self, *, topic: str, delay: float, callback: str, content: Any, retry: int | None = None
    ) -> Call[str]:
        """`POST /create`; the id of the new message. No dedup there: retried only on 429."""
        doc = {"topic": topic, "delay": delay, "callback": callback, "content": content, **_fields(retry=retry)}
        return Call(
            "POST",
            "/create",
            lambda answer: str(answer["id"]),
            body=doc,
            retry_on=THROTTLED_ONLY,
            retry_transport=False,
        )

    @endpoint
    def later_query(self, message_id: str) -> Call[dict[str, Any]]:
        return Call("POST", "/query", dict, body={"id": message_id})

    @endpoint
    def later_delete(self, message_id: str) -> Call[None]:
        return Call("POST", "/delete", _nothing, body={"id": message_id})


def _version_of(doc: Any) -> str | None:
    version = (doc or {}).get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, str) else None
