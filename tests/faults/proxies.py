"""Fault-injecting stand-ins for boto3 clients: failing calls, failing batch entries, throttled HTTP answers.

No pytest here: the chaos runtime (a child process) uses these too.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from hourglass.adapters.timer_queue import read_timers

Kwargs = dict[str, Any]


class Crash(BaseException):
    """The process dies mid-call: not an Exception, so no handler of the code under test catches it."""


@dataclass
class Rule:
    operation: str
    times: int | None
    when: Callable[[Kwargs], bool] | None
    act: Callable[[str], None]
    after: bool = False

    def fires(self, operation: str, kwargs: Kwargs) -> bool:
        if operation != self.operation or self.times == 0:
            return False
        if self.when is not None and not self.when(kwargs):
            return False
        if self.times is not None:
            self.times -= 1
        return True


def client_error(operation: str, code: str, status: int, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": "injected fault"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, operation)  # type: ignore[arg-type]


def connection_error(operation: str, kind: str) -> Exception:
    """A botocore error that is not a ClientError: no connection, a read timeout, a closed connection."""
    url = "http://127.0.0.1:1/"
    if kind == "read_timeout":
        return ReadTimeoutError(endpoint_url=url)
    if kind == "closed":
        return ConnectionClosedError(endpoint_url=url)
    return EndpointConnectionError(endpoint_url=url)


class FaultyClient:
    """Stands in for a boto3 client: chosen operations (or batch entries) fail, everything else passes."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._rules: list[Rule] = []
        self._entry_rules: list[tuple[str, Callable[[Kwargs], bool]]] = []
        self._lock = threading.Lock()
        self.injected: Counter[str] = Counter()

    @property
    def meta(self) -> Any:
        return self._client.meta

    def fail(
        self,
        operation: str,
        *,
        code: str = "InternalFailure",
        status: int = 500,
        times: int | None = 1,
        when: Callable[[Kwargs], bool] | None = None,
        reasons: list[str] | None = None,
    ) -> None:
        """The next `times` calls (None: all) of `operation` matching `when` raise a ClientError.

        `reasons`: the CancellationReasons codes of a TransactionCanceledException, one per item.
        """

        def act(op: str) -> None:
            raise client_error(op, code, status, reasons)

        self._rules.append(Rule(operation, times, when, act))

    def disconnect(
        self,
        operation: str,
        *,
        kind: str = "connect",
        times: int | None = 1,
        when: Callable[[Kwargs], bool] | None = None,
        after: bool = False,
    ) -> None:
        """The call fails with a botocore connection error; `after`: the call is made first (it committed)."""

        def act(op: str) -> None:
            raise connection_error(op, kind)

        self._rules.append(Rule(operation, times, when, act, after=after))

    def crash(self, operation: str, *, times: int | None = 1, when: Callable[[Kwargs], bool] | None = None) -> None:
        """The caller dies instead of making the call."""

        def act(op: str) -> None:
            raise Crash(f"crashed before {op}")

        self._rules.append(Rule(operation, times, when, act))

    def before(self, operation: str, action: Callable[[], object], *, times: int | None = 1) -> None:
        """Runs `action` just before the call: another actor's move lands in between."""

        def act(op: str) -> None:
            action()

        self._rules.append(Rule(operation, times, None, act))

    def fail_entries(self, which: Callable[[Kwargs], bool]) -> None:
        """SendMessageBatch entries for which `which(entry)` holds are reported as failed, the rest sent."""
        self._entry_rules.append(("send_message_batch", which))

    def heal(self) -> None:
        with self._lock:
            self._rules.clear()
            self._entry_rules.clear()

    def _check(self, operation: str, kwargs: Kwargs) -> list[Rule]:
        """Acts the rules that fire before the call; returns those that act after it."""
        with self._lock:
            fired = [rule for rule in self._rules if rule.fires(operation, kwargs)]
            self.injected[operation] += len(fired)
        for rule in fired:
            if not rule.after:
                rule.act(operation)
        return [rule for rule in fired if rule.after]

    def _send_batch(self, kwargs: Kwargs) -> Kwargs:
        with self._lock:
            rules = [which for op, which in self._entry_rules if op == "send_message_batch"]
        failing = [e for e in kwargs["Entries"] if any(which(e) for which in rules)]
        passing = [e for e in kwargs["Entries"] if e not in failing]
        answer: Kwargs = {"Successful": [], "Failed": []}
        if passing:
            answer = dict(self._client.send_message_batch(**{**kwargs, "Entries": passing}))
            answer.setdefault("Failed", [])
        for entry in failing:
            answer["Failed"].append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
        with self._lock:
            self.injected["send_message_batch entries"] += len(failing)
        return answer

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(**kwargs: Any) -> Any:
            after = self._check(name, kwargs)
            if name == "send_message_batch" and self._entry_rules:
                return self._send_batch(kwargs)
            answer = attr(**kwargs)
            for rule in after:
                rule.act(name)
            return answer

        return call


class Serialized:
    """One call at a time: DynamoDB's conditional writes are atomic, moto's in-memory ones are not under threads."""

    def __init__(self, client: Any, lock: threading.Lock) -> None:
        self._client = client
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(**kwargs: Any) -> Any:
            with self._lock:
                return attr(**kwargs)

        return call


def timer_ids(timers: list[dict[str, Any]]) -> list[str]:
    """The message ids of drained timer messages, packs opened."""
    return [timer.id for t in timers for timer in read_timers(t["body"])]


def timer_for(*message_ids: str) -> Callable[[Kwargs], bool]:
    """Matches a timer-queue entry (or SendMessageBatch call) carrying one of these message ids."""
    ids = set(message_ids)

    def matches(entry: Kwargs) -> bool:
        entries = entry.get("Entries", [entry])
        return any(timer.id in ids for e in entries for timer in read_timers(e["MessageBody"]))

    return matches


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


@dataclass
class Throttle:
    """A `before-send` hook answering the next `times` calls of `operation` with an error, before moto sees them."""

    operation: str
    code: str
    status: int = 400
    times: int | None = 1
    answered: int = 0
    reasons: list[str] | None = None  # CancellationReasons codes of a TransactionCanceledException

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        if not target.endswith("." + self.operation) or self.times == self.answered:
            return None
        self.answered += 1
        error: dict[str, Any] = {"__type": f"com.amazonaws.dynamodb.v20120810#{self.code}", "message": "injected"}
        if self.reasons is not None:
            error["CancellationReasons"] = [{"Code": code} for code in self.reasons]
        body = json.dumps(error)
        headers = {"x-amzn-RequestId": "injected", "Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, self.status, headers, _Raw(body.encode()))


@dataclass
class Disconnect:
    """A `before-send` hook: the next `times` calls of `operation` get no answer (a connection error,
    which botocore's retries see, as they see a real one)."""

    operation: str
    kind: str = "connect"
    times: int = 1
    raised: int = 0

    def __call__(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        if target.endswith("." + self.operation) and self.raised < self.times:
            self.raised += 1
            raise connection_error(self.operation, self.kind)
