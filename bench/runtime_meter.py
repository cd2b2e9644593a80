"""What the local runtime asks of AWS while a benchmark runs: DynamoDB units, SQS requests, Lambda invocations.

Attached to a started `devstack.runtime.Runtime` without changing it: the Store's `meter` hook,
botocore events on the runtime's SQS clients, and wrappers around the handlers the runtime's
gateway, pollers, schedule and fan-out invoker call (each wrapper call is one Lambda invocation).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import inprocess
from bench.capacity_units import CapacityMeter, indexes_of
from devstack.runtime import Runtime

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass
class Invocations:
    count: int = 0
    seconds: float = 0.0
    durations: list[float] = field(default_factory=list)


class RuntimeMeter:
    def __init__(self, runtime: Runtime) -> None:
        assert runtime.context is not None and runtime.settings is not None
        self.runtime = runtime
        table = runtime.settings.table
        description = runtime.client("dynamodb").describe_table(TableName=table)["Table"]
        self.capacity = CapacityMeter(table, indexes_of(description))
        self.sqs: dict[str, int] = defaultdict(int)
        self.lambdas: dict[str, Invocations] = defaultdict(Invocations)
        self._lock = threading.Lock()

    def attach(self) -> RuntimeMeter:
        runtime = self.runtime
        assert runtime.context and runtime.gateway and runtime.pollers and runtime.schedule and runtime.invoker
        inprocess.meter_table(runtime.context, self.capacity)
        sqs = (runtime.pollers.sqs, runtime.context.timers.client, runtime.context.targets.client)
        clients = {id(c): c for c in sqs}
        for client in clients.values():
            client.meta.events.register("after-call.sqs", self._sqs_call)
        runtime.gateway.handler = self._timed("ingest", runtime.gateway.handler)
        runtime.pollers.handler = self._timed("dispatcher", runtime.pollers.handler)
        runtime.schedule.handler = self._timed("sweeper", runtime.schedule.handler)
        runtime.invoker.handler = self._timed("sweeper fan-out", runtime.invoker.handler)
        return self

    def _sqs_call(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        name = model.name
        if name == "ReceiveMessage" and not parsed.get("Messages"):
            name = "ReceiveMessage (empty)"
        with self._lock:
            self.sqs[name] += 1

    def _timed(self, name: str, handler: Handler) -> Handler:
        def call(event: dict[str, Any], context: Any) -> dict[str, Any]:
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    calls = self.lambdas[name]
                    calls.count += 1
                    calls.seconds += elapsed
                    calls.durations.append(elapsed)

        return call

    def counts(self) -> dict[str, Any]:
        """A copy of the counters, to subtract the set-up's share later."""
        _, uses = self.capacity.snapshot()
        with self._lock:
            return {
                "sqs": dict(self.sqs),
                "lambdas": {k: (v.count, v.seconds) for k, v in self.lambdas.items()},
                "dynamodb": {k: (u.write, u.read, u.requests) for k, u in uses.items()},
            }
