"""Stand-ins for Lambda's SQS event source, asynchronous Invoke and the EventBridge schedule, as threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hourglass.logs import log

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class LambdaContext:
    """Just enough of the Lambda context object: how much time the invocation has left.

    None once the runtime stops: the handler winds down as at its timeout, so `Runtime.stop` can join it.
    """

    def __init__(self, timeout: float, stop: threading.Event | None = None) -> None:
        self.deadline = time.monotonic() + timeout
        self.stop = stop

    def get_remaining_time_in_millis(self) -> int:
        if self.stop is not None and self.stop.is_set():
            return 0
        return int(max(0.0, self.deadline - time.monotonic()) * 1000)


def join_all(threads: list[threading.Thread], deadline: float) -> None:
    """Waits for each of `threads` until the monotonic `deadline` at the latest."""
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


class QueuePoller:
    """Receives up to 10 messages, invokes the handler, deletes all but the reported failures."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        *,
        threads: int,
        stop: threading.Event,
        visibility: int | None = None,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.visibility = visibility
        self.handler = handler
        self.stop = stop
        self.threads = [threading.Thread(target=self._loop, name=f"poller-{i}", daemon=True) for i in range(threads)]
        self.invocations = 0

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self, deadline: float) -> None:
        join_all(self.threads, deadline)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:
                log("poller_error", error=str(exc))
                self.stop.wait(1.0)

    def poll_once(self) -> int:
        receive: dict[str, Any] = {"QueueUrl": self.queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}
        if self.visibility is not None:
            receive["VisibilityTimeout"] = self.visibility
        answer = self.sqs.receive_message(**receive, AttributeNames=["All"])
        messages = answer.get("Messages", [])
        if not messages:
            return 0
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "eventSource": "aws:sqs",
                    # Lambda's event source names the queue; the handler tells the timer DLQ by it.
                    "eventSourceARN": "arn:aws:sqs:::" + self.queue_url.rstrip("/").rsplit("/", 1)[-1],
                }
                for m in messages
            ]
        }
        self.invocations += 1
        result = self.handler(event, LambdaContext(60, self.stop))
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        done = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages)
            if m["MessageId"] not in failed
        ]
        if done:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=done)
        return len(messages)


class Schedule:
    """Invokes the handler every `interval` seconds, like an EventBridge rate() rule."""

    def __init__(self, handler: Handler, interval: float, *, stop: threading.Event, timeout: float = 60.0) -> None:
        self.handler = handler
        self.interval = interval
        self.timeout = timeout
        self.stop = stop
        self.thread = threading.Thread(target=self._loop, name="schedule", daemon=True)
        self.runs = 0

    def start(self) -> None:
        self.thread.start()

    def join(self, deadline: float) -> None:
        join_all([self.thread], deadline)

    def _loop(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.handler({"source": "aws.events"}, LambdaContext(self.timeout, self.stop))
                self.runs += 1
            except Exception as exc:
                log("schedule_error", error=str(exc))
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - started)))


class ThreadInvoker:
    """Lambda's asynchronous Invoke (InvocationType=Event): each event runs the handler in a new thread."""

    def __init__(self, handler: Handler, *, timeout: float = 60.0, stop: threading.Event | None = None) -> None:
        self.handler = handler
        self.timeout = timeout
        self.stop = stop
        self.invocations = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def invoke(self, event: dict[str, Any]) -> None:
        thread = threading.Thread(target=self._run, args=(event,), name="invoke", daemon=True)
        with self._lock:
            self.invocations += 1
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()  # under the lock: `join` never sees it registered but not yet alive

    def join(self, deadline: float) -> None:
        """Waits for the invocations running now (and any they start) until `deadline` at the latest."""
        while time.monotonic() < deadline:
            with self._lock:
                running = [t for t in self._threads if t.is_alive()]
            if not running:
                return
            join_all(running, deadline)

    def _run(self, event: dict[str, Any]) -> None:
        try:
            self.handler(event, LambdaContext(self.timeout, self.stop))
        except Exception as exc:
            log("invoke_error", error=str(exc))
