"""The local runtime with faults injected into its AWS clients and dispatcher: `python -m tests.faults.chaos`.

`HOURGLASS_CHAOS` (JSON) sets the odds of each fault; what was injected is written to the file named
by `HOURGLASS_CHAOS_STATS` twice a second, so the counts survive a SIGKILL.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hourglass.adapters.http_target import HttpReply
from hourglass.service.context import Context

from devstack.config import RuntimeConfig
from devstack.runtime import Runtime
from tests.faults.proxies import FaultyClient, Throttle, connection_error

# The DynamoDB calls the service makes (FaultyClient rules are per operation).
DYNAMODB_CALLS = (
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "batch_get_item",
    "batch_write_item",
    "transact_write_items",
)


class DispatcherCrash(RuntimeError):
    """The dispatcher invocation dies: the poller sees a failed invocation and deletes nothing."""


@dataclass
class Odds:
    seed: int = 1
    throttle: float = 0.0  # each DynamoDB call answered 400 throttling (botocore retries it)
    sweep_send_fails: float = 0.0  # a sweeper SendMessageBatch call fails entirely
    sweep_entry_fails: float = 0.0  # one sweeper SendMessageBatch entry fails
    any_send_fails: float = 0.0  # any SendMessageBatch call (ingest, retry, redelay) fails entirely
    crash_before_post: float = 0.0  # the dispatcher dies before calling the callback
    crash_after_post: float = 0.0  # ... after the callback answered, before recording it
    transact_throttled: float = 0.0  # TransactWriteItems cancelled with ThrottlingError reasons (botocore: no retry)
    connection_errors: float = 0.0  # a DynamoDB or SQS request fails to connect or times out (botocore retries it)
    # a DynamoDB call of the API or dispatcher raises a connection error to the code (botocore gave up) ...
    client_connection_errors: float = 0.0
    # ... of the sweeper (a lost release or claim then waits for the recovery sweep: minutes) ...
    sweeper_connection_errors: float = 0.0
    # ... or after it committed (a read timeout on the answer): the caller cannot tell it landed
    client_timeouts_after_commit: float = 0.0


@dataclass
class Chaos:
    odds: Odds
    injected: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.random = random.Random(self.odds.seed)

    def roll(self, odds: float, kind: str) -> bool:
        with self.lock:
            hit = self.random.random() < odds
            if hit:
                self.injected[kind] += 1
        return hit

    def throttle(self, operation: str) -> Throttle | None:
        if operation == "TransactWriteItems" and self.roll(self.odds.transact_throttled, "throttled transactions"):
            return Throttle(operation, "TransactionCanceledException", reasons=["ThrottlingError", "None"])
        return (
            Throttle(operation, "ProvisionedThroughputExceededException")
            if self.roll(self.odds.throttle, "throttled DynamoDB calls")
            else None
        )

    def disconnect(self, request: Any, **_: Any) -> None:
        """A `before-send` hook: the request never gets an answer (botocore's retries see it)."""
        if self.roll(self.odds.connection_errors, "connection errors (retried by botocore)"):
            kind = "read_timeout" if self.random.random() < 0.5 else "connect"
            raise connection_error("", kind)


def in_sweeper() -> bool:
    return threading.current_thread().name == "schedule"


class ChaosRuntime(Runtime):
    chaos: Chaos

    def _build_context(self, endpoint: str) -> Context:
        ctx = super()._build_context(endpoint)
        chaos = self.chaos

        def throttle(request: Any, **kwargs: Any) -> Any:
            target = request.headers.get("X-Amz-Target", b"")
            operation = (target.decode() if isinstance(target, bytes) else target).rpartition(".")[2]
            injected = chaos.throttle(operation)
            return None if injected is None else injected(request, **kwargs)

        ctx.store.client.meta.events.register_first("before-send.dynamodb", throttle)
        for client in (ctx.store.client, ctx.timers.client):
            service = client.meta.service_model.service_id.hyphenize()
            client.meta.events.register_first(f"before-send.{service}", chaos.disconnect)
        odds = chaos.odds
        ddb = FaultyClient(ctx.store.client)
        for operation in DYNAMODB_CALLS:
            ddb.disconnect(
                operation,
                kind="connect",
                times=None,
                when=lambda _: chaos.roll(
                    odds.sweeper_connection_errors if in_sweeper() else odds.client_connection_errors,
                    "connection errors raised to the code",
                ),
            )
            ddb.disconnect(
                operation,
                kind="read_timeout",
                times=None,
                after=True,
                when=lambda _: chaos.roll(odds.client_timeouts_after_commit, "read timeouts after a commit"),
            )
        ctx.store.client = ddb
        sqs = FaultyClient(ctx.timers.client)
        sqs.fail("send_message_batch", times=None, when=lambda _: chaos.roll(odds.any_send_fails, "failed sends"))
        sqs.fail(
            "send_message_batch",
            times=None,
            when=lambda _: in_sweeper() and chaos.roll(odds.sweep_send_fails, "failed sweeper sends"),
        )
        sqs.fail_entries(lambda _: in_sweeper() and chaos.roll(odds.sweep_entry_fails, "failed sweeper entries"))
        ctx.timers.client = sqs
        real_post = ctx.post

        def post(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> HttpReply:
            if chaos.roll(odds.crash_before_post, "dispatcher crashes before the callback"):
                raise DispatcherCrash("killed before the callback")
            reply = real_post(url, body, headers, **kwargs)
            if chaos.roll(odds.crash_after_post, "dispatcher crashes after the callback"):
                raise DispatcherCrash("killed after the callback")
            return reply

        ctx.post = post
        return ctx


def report(runtime: ChaosRuntime, path: Path, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        assert runtime.context is not None
        counts = {**runtime.chaos.injected, **{k: v for k, v in runtime.context.metrics.counts.items()}}
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(counts))
        temporary.replace(path)


def main() -> int:
    runtime = ChaosRuntime(RuntimeConfig.from_env())
    runtime.chaos = Chaos(Odds(**json.loads(os.environ.get("HOURGLASS_CHAOS", "{}"))))
    runtime.start()
    stop = threading.Event()
    stats = os.environ.get("HOURGLASS_CHAOS_STATS")
    if stats:
        assert runtime.settings is not None
        # Where the run's state is, for the liveness check that reads it afterwards (devstack/liveness.py).
        settings = runtime.settings
        where = {"table": settings.table, "timer_queues": [settings.timer_queue_url, settings.timer_dlq_url]}
        Path(stats).with_suffix(".where.json").write_text(json.dumps(where))
        threading.Thread(target=report, args=(runtime, Path(stats), stop), daemon=True).start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("hourglass: ready (chaos)", flush=True)
    stop.wait()
    runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
