"""The synchronous Hourglass client: one method per endpoint of the REST contract (v1 and v1.1)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

from hourglass_client import batches
from hourglass_client.models import Attempt, Created, Message, Operation, Page, Queue, Schedule, format_time
from hourglass_client.sigv4 import SigV4Signer
from hourglass_client.transport import RETRY_STATUSES, RetryPolicy, Transport, path

THROTTLED_ONLY = frozenset({429})
T = TypeVar("T")


def new_dedup_id() -> str:
    """A dedup id for a message whose caller gave none, so that a retried POST creates it once."""
    return f"sdk-{uuid.uuid4().hex}"


def _fields(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _when(deliver_at: datetime | str | None) -> str | None:
    return None if deliver_at is None else format_time(deliver_at)


def message(
    body: Any,
    *,
    delay: float | None = None,
    deliver_at: datetime | str | None = None,
    timezone: str | None = None,
    ttl: float | None = None,
    dedup_id: str | None = None,
    target: Mapping[str, Any] | None = None,
    flow_key: str | None = None,
    priority: int | None = None,
    window: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One entry of a create request (only the fields given are sent); `window` (`windows.window`) replaces the
    queue's delivery window for this message."""
    return {
        "body": body,
        **_fields(
            delay=delay,
            deliver_at=_when(deliver_at),
            timezone=timezone,
            ttl=ttl,
            dedup_id=dedup_id,
            target=dict(target) if target else None,
            flow_key=flow_key,
            priority=priority,
            window=dict(window) if window else None,
        ),
    }


def breaker(failure_ratio: float, min_attempts: int, window: int) -> dict[str, Any]:
    """A queue's `circuit_breaker`: it pauses itself once `min_attempts` attempts ended within `window` seconds
    and at least `failure_ratio` of them failed or were retried."""
    return {"failure_ratio": failure_ratio, "min_attempts": min_attempts, "window": window}


class Client:
    """Talks to one Hourglass API. `base_url` and `api_key` default to HOURGLASS_URL and
    HOURGLASS_API_KEY. `auth="iam"` (or HOURGLASS_AUTH=iam) signs every request with AWS SigV4
    from the standard credential chain, for a stack deployed with `hourglass:auth` `iam` (or `both`,
    with the key too); `region` defaults to the URL's, then the AWS configuration's. Calls that are
    safe to repeat are retried on 429/503 and connection errors; creates are made safe first by
    giving every message a dedup id (`auto_dedup`)."""

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

    def _call(self, method: str, route: str, **kwargs: Any) -> Any:
        return self.transport.request(method, route, **kwargs)[1]

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/health") or {})

    def server_version(self) -> str | None:
        """The release the server runs (`GET /health`, contract v1.3); None from a server before 1.3.0."""
        version = self.health().get("version")
        return version if isinstance(version, str) else None

    # --- queues -------------------------------------------------------------------------------

    def put_queue(
        self,
        name: str,
        *,
        default_delay: float | None = None,
        max_delay: float | None = None,
        ttl: float | None = None,
        target: Mapping[str, Any] | None = None,
        retry: Mapping[str, Any] | None = None,
        signing_secret: str | None = None,
        signing_secret_next: str | None = None,
        rate_limit: float | None = None,
        max_concurrency: int | None = None,
        timeout: float | None = None,
        failure_destination: Mapping[str, Any] | None = None,
        window: Mapping[str, Any] | None = None,
        circuit_breaker: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Queue:
        """Creates or replaces a queue; fields left None take the server's defaults. `circuit_breaker`
        (`{"failure_ratio", "min_attempts", "window"}`, see `breaker`) pauses the queue when its attempts
        keep failing. `settings` is merged last (a raw document, for fields this SDK does not know yet)."""
        doc = _fields(
            default_delay=default_delay,
            max_delay=max_delay,
            ttl=ttl,
            target=dict(target) if target else None,
            retry=dict(retry) if retry else None,
            signing_secret=signing_secret,
            signing_secret_next=signing_secret_next,
            rate_limit=rate_limit,
            max_concurrency=max_concurrency,
            timeout=timeout,
            failure_destination=dict(failure_destination) if failure_destination else None,
            window=dict(window) if window else None,
            circuit_breaker=dict(circuit_breaker) if circuit_breaker else None,
        )
        doc.update(settings or {})
        return Queue.from_doc(self._call("PUT", path("v1", "queues", name), body=doc))

    def get_queue(self, name: str) -> Queue:
        return Queue.from_doc(self._call("GET", path("v1", "queues", name)))

    def delete_queue(self, name: str) -> None:
        self._call("DELETE", path("v1", "queues", name))

    def pause_queue(self, name: str) -> Queue:
        return Queue.from_doc(self._call("POST", path("v1", "queues", name, "pause")))

    def resume_queue(self, name: str) -> Queue:
        return Queue.from_doc(self._call("POST", path("v1", "queues", name, "resume")))

    def list_queues(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Queue]:
        """One page of `GET /v1/queues`: queues in name order."""
        doc = self._call("GET", "/v1/queues", params={"limit": limit, "cursor": cursor})
        return Page([Queue.from_doc(q) for q in doc.get("queues", [])], doc.get("next_cursor"))

    def iter_queues(self, *, page_size: int | None = None) -> Iterator[Queue]:
        return _pages(lambda cursor: self.list_queues(limit=page_size, cursor=cursor))

    # --- messages -----------------------------------------------------------------------------

    def send(
        self,
        queue: str,
        body: Any,
        *,
        delay: float | None = None,
        deliver_at: datetime | str | None = None,
        timezone: str | None = None,
        ttl: float | None = None,
        dedup_id: str | None = None,
        target: Mapping[str, Any] | None = None,
        flow_key: str | None = None,
        priority: int | None = None,
        window: Mapping[str, Any] | None = None,
    ) -> Created:
        """Schedules one message; `flow_key` and `priority` for a queue's flow control (v1.2)."""
        entry = message(
            body,
            delay=delay,
            deliver_at=deliver_at,
            timezone=timezone,
            ttl=ttl,
            dedup_id=dedup_id,
            target=target,
            window=window,
            flow_key=flow_key,
            priority=priority,
        )
        return self.send_batch(queue, [entry])[0]

    def send_batch(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> list[Created]:
        """Schedules messages (dicts as built by `message()`) in order, in requests of at most 100
        that fit the API's size limit. Each request is all or nothing; a failure raises after the
        earlier requests were stored (`send_batches` tells how many)."""
        return [created for stored in self.send_batches(queue, messages) for created in stored]

    def send_batches(self, queue: str, messages: Iterable[Mapping[str, Any]]) -> Iterator[list[Created]]:
        """`send_batch` one request at a time: yields what each request stored, so that when one
        raises, the messages before it (and only those) are known to be stored."""
        for chunk in batches.chunks(self._with_dedup(m) for m in messages):
            yield self._create(queue, chunk)

    def _with_dedup(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        # Chosen before the first try (and before sizing the request): a retry repeats the same ids,
        # so the server stores each once.
        given = dict(entry)
        if self.auto_dedup and given.get("dedup_id") is None:
            given["dedup_id"] = new_dedup_id()
        return given

    def _create(self, queue: str, entries: list[Mapping[str, Any]]) -> list[Created]:
        safe = all(entry.get("dedup_id") for entry in entries)
        doc = self._call(
            "POST",
            path("v1", "queues", queue, "messages"),
            body={"messages": entries},
            retry_on=RETRY_STATUSES if safe else THROTTLED_ONLY,
            retry_transport=safe,
        )
        return [Created.from_doc(d) for d in doc["messages"]]

    def get_message(self, queue: str, message_id: str) -> Message:
        return Message.from_doc(self._call("GET", path("v1", "queues", queue, "messages", message_id)))

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
    ) -> Page[Message]:
        """One page; `order`: "due" (earliest scheduled first) or "created" (oldest first)."""
        params = {
            "status": status,
            "schedule": schedule,
            "limit": limit,
            "cursor": cursor,
            "order": order,
            "flow_key": flow_key,
        }
        doc = self._call("GET", path("v1", "queues", queue, "messages"), params=params)
        return Page([Message.from_doc(m) for m in doc.get("messages", [])], doc.get("next_cursor"))

    def iter_messages(
        self,
        queue: str,
        *,
        status: str | None = None,
        schedule: str | None = None,
        page_size: int | None = None,
        order: str | None = None,
        flow_key: str | None = None,
    ) -> Iterator[Message]:
        """Every message of the queue (optionally of one status, schedule or flow key, in `order`), page after page."""
        return _pages(
            lambda cursor: self.list_messages(
                queue, status=status, schedule=schedule, limit=page_size, cursor=cursor, order=order, flow_key=flow_key
            )
        )

    def cancel(self, queue: str, message_id: str) -> None:
        """Cancels a pending message (no error when it is already cancelled; Conflict once it ran)."""
        self._call("DELETE", path("v1", "queues", queue, "messages", message_id))

    def patch(
        self,
        queue: str,
        message_id: str,
        *,
        body: Any = None,
        delay: float | None = None,
        deliver_at: datetime | str | None = None,
        timezone: str | None = None,
    ) -> Message:
        """Edits or reschedules a pending message. To set the body to JSON null, use `patch_doc`."""
        doc = _fields(body=body, delay=delay, deliver_at=_when(deliver_at), timezone=timezone)
        return self.patch_doc(queue, message_id, doc)

    def patch_doc(self, queue: str, message_id: str, doc: Mapping[str, Any]) -> Message:
        route = path("v1", "queues", queue, "messages", message_id)
        return Message.from_doc(self._call("PATCH", route, body=dict(doc)))

    def redeliver(
        self, queue: str, message_id: str, *, delay: float | None = None, deliver_at: datetime | str | None = None
    ) -> Message:
        """Makes a failed, expired or delivered message pending again. Retried only on 429: a
        repeat after a lost answer would be a Conflict, not a second delivery."""
        doc = _fields(delay=delay, deliver_at=_when(deliver_at))
        route = path("v1", "queues", queue, "messages", message_id, "redeliver")
        return Message.from_doc(
            self._call("POST", route, body=doc or None, retry_on=THROTTLED_ONLY, retry_transport=False)
        )

    def deliver_now(self, queue: str, message_id: str) -> Message:
        """Makes a pending message due now (Conflict unless pending); safe to repeat."""
        return Message.from_doc(self._call("POST", path("v1", "queues", queue, "messages", message_id, "deliver-now")))

    def attempts(self, queue: str, message_id: str) -> list[Attempt]:
        doc = self._call("GET", path("v1", "queues", queue, "messages", message_id, "attempts"))
        return [Attempt.from_doc(a) for a in doc.get("attempts", [])]

    # --- bulk operations ----------------------------------------------------------------------

    def start_operation(
        self,
        queue: str,
        action: str,
        *,
        filter: Mapping[str, Any] | None = None,
        seconds: float | None = None,
    ) -> Operation:
        """Starts a bulk `cancel`, `redeliver` or `shift` (by `seconds`); retried only on 429."""
        doc = {"action": action, "filter": dict(filter or {}), **_fields(seconds=seconds)}
        answer = self._call(
            "POST",
            path("v1", "queues", queue, "operations"),
            body=doc,
            retry_on=THROTTLED_ONLY,
            retry_transport=False,
        )
        return Operation.from_doc(answer)

    def get_operation(self, queue: str, operation_id: str) -> Operation:
        return Operation.from_doc(self._call("GET", path("v1", "queues", queue, "operations", operation_id)))

    def wait_operation(
        self, queue: str, operation_id: str, *, poll: float = 1.0, timeout: float | None = None
    ) -> Operation:
        """Polls until the operation is no longer `running` (TimeoutError after `timeout` s)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            operation = self.get_operation(queue, operation_id)
            if operation.done:
                return operation
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"operation {operation_id} still running after {timeout} s")
            self.sleep(poll)

    # --- schedules ----------------------------------------------------------------------------

    def put_schedule(
        self,
        queue: str,
        name: str,
        *,
        cron: str | None = None,
        every: float | None = None,
        timezone: str | None = None,
        body: Any = None,
        target: Mapping[str, Any] | None = None,
        start_at: datetime | str | None = None,
        end_at: datetime | str | None = None,
        window: Mapping[str, Any] | None = None,
        catch_up: str | None = None,
        jitter: int | None = None,
    ) -> Schedule:
        """Creates or replaces a recurring schedule (exactly one of `cron` and `every`). `catch_up` (`skip`,
        `latest` or `all`) says which occurrences missed while paused or down still run; `jitter` delays each
        occurrence by up to that many seconds, never early."""
        doc = _fields(
            cron=cron,
            every=every,
            timezone=timezone,
            body=body,
            target=dict(target) if target else None,
            start_at=_when(start_at),
            end_at=_when(end_at),
            window=dict(window) if window else None,
            catch_up=catch_up,
            jitter=jitter,
        )
        return Schedule.from_doc(self._call("PUT", path("v1", "queues", queue, "schedules", name), body=doc))

    def get_schedule(self, queue: str, name: str) -> Schedule:
        return Schedule.from_doc(self._call("GET", path("v1", "queues", queue, "schedules", name)))

    def list_schedules(self, queue: str, *, limit: int | None = None, cursor: str | None = None) -> Page[Schedule]:
        doc = self._call("GET", path("v1", "queues", queue, "schedules"), params={"limit": limit, "cursor": cursor})
        return Page([Schedule.from_doc(s) for s in doc.get("schedules", [])], doc.get("next_cursor"))

    def iter_schedules(self, queue: str, *, page_size: int | None = None) -> Iterator[Schedule]:
        return _pages(lambda cursor: self.list_schedules(queue, limit=page_size, cursor=cursor))

    def delete_schedule(self, queue: str, name: str) -> None:
        self._call("DELETE", path("v1", "queues", queue, "schedules", name))

    def pause_schedule(self, queue: str, name: str) -> Schedule:
        return Schedule.from_doc(self._call("POST", path("v1", "queues", queue, "schedules", name, "pause")))

    def resume_schedule(self, queue: str, name: str) -> Schedule:
        return Schedule.from_doc(self._call("POST", path("v1", "queues", queue, "schedules", name, "resume")))

    # --- the `later`-compatible endpoints -------------------------------------------------------

    def later_create(self, *, topic: str, delay: float, callback: str, content: Any, retry: int | None = None) -> str:
        """`POST /create`; the id of the new message. No dedup there: retried only on 429."""
        doc = {"topic": topic, "delay": delay, "callback": callback, "content": content, **_fields(retry=retry)}
        answer = self._call("POST", "/create", body=doc, retry_on=THROTTLED_ONLY, retry_transport=False)
        return str(answer["id"])

    def later_query(self, message_id: str) -> dict[str, Any]:
        return dict(self._call("POST", "/query", body={"id": message_id}))

    def later_delete(self, message_id: str) -> None:
        self._call("POST", "/delete", body={"id": message_id})


def _pages(fetch: Callable[[str | None], Page[T]]) -> Iterator[T]:
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if not page.next_cursor or page.next_cursor == cursor:
            return
        cursor = page.next_cursor
