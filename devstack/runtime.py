"""The local runtime: emulator, the CDK stack deployed into it, API, sweeper and pollers."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.aws import AWS_CONFIG
from hourglass.adapters.body_store import BodyStore
from hourglass.adapters.metric_history import MinuteHistory
from hourglass.adapters.metrics import Metrics
from hourglass.adapters.service_targets import ServiceTargets
from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.handlers import api as api_handler
from hourglass.handlers import dispatcher as dispatcher_handler
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.service.rest import Api
from hourglass.settings import Settings

from devstack import crash, deploy
from devstack.config import RuntimeConfig
from devstack.emulator import Emulator, use_dummy_credentials
from devstack.gateway import Gateway
from devstack.pollers import QueuePoller, Schedule, ThreadInvoker
from devstack.sigv4 import SigV4Check

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".hourglass"
SOURCES = ("app.py", "cdk.json", "stacks", "lambdas")
# How long `Runtime.stop` waits for its threads: an invocation in progress sees no time left and winds
# down, but an attempt it already started runs to its own timeout.
STOP_TIMEOUT = 60.0


def source_digest(context: dict[str, object]) -> str:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode())
    # The Lambda asset also bundles the installed tzdata (stacks/constructs/lambda_package.py).
    digest.update(importlib.metadata.version("tzdata").encode())
    for name in SOURCES:
        path = ROOT / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(str(file.relative_to(ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def cached_synth(context: dict[str, object]) -> Path:
    """Synthesizes once per source and context: restarts skip the 10-20 s of jsii start-up."""
    outdir = CACHE / f"cdk.out-{source_digest(context)}"
    if not (outdir / "manifest.json").exists():
        CACHE.mkdir(exist_ok=True)
        deploy.synth(outdir, context)
    return outdir


@dataclass
class Runtime:
    config: RuntimeConfig
    emulator: Emulator | None = None
    gateway: Gateway | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    settings: Settings | None = None
    context: Context | None = None
    pollers: QueuePoller | None = None
    dlq_poller: QueuePoller | None = None
    schedule: Schedule | None = None
    invoker: ThreadInvoker | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    ready: bool = False

    def start(self) -> Runtime:
        config = self.config
        use_dummy_credentials(config.region)
        self.emulator = (
            Emulator.external(config.endpoint_url)
            if config.endpoint_url
            else Emulator.start(config.emulator_port, state=config.state_file)
        )
        endpoint = self.emulator.endpoint_url
        assembly = cached_synth(config.cdk_context())
        self.outputs = deploy.deploy(assembly, endpoint_url=endpoint, region=config.region)
        self._disable_emulated_event_sources()
        self.settings = Settings.from_env(self._lambda_environment())
        self.context = self._build_context(endpoint)
        if config.crash_at is not None:
            crash.arm(self.context, config.crash_at, config.crash_after)
        api = Api(self.context)
        dispatcher = Dispatcher(self.context)
        self.gateway = Gateway(
            lambda event, _: api_handler.handle(api, event),
            config.api_port,
            lambda: self.ready,
            authenticate=SigV4Check.of_emulator(config.region) if config.signed else None,
        )
        self.gateway.start()
        sqs = self.client("sqs")
        self.pollers = QueuePoller(
            sqs,
            self.settings.timer_queue_url,
            lambda event, lambda_context: dispatcher_handler.handle(dispatcher, event, lambda_context),
            threads=config.dispatcher_threads,
            stop=self.stop_event,
            visibility=config.poll_visibility,
        )
        self.pollers.start()
        if self.settings.timer_dlq_url:
            # The timer DLQ's event source: a dead-lettered timer's message ends failed with a reason.
            self.dlq_poller = QueuePoller(
                sqs,
                self.settings.timer_dlq_url,
                lambda event, lambda_context: dispatcher_handler.handle(dispatcher, event, lambda_context),
                threads=1,
                stop=self.stop_event,
            )
            self.dlq_poller.start()
        context = self.context
        # Fan-out invocations of a busy sweep run the same handler, in threads.
        self.invoker = ThreadInvoker(
            lambda event, ctx: sweeper_handler.handle(context, event, ctx), stop=self.stop_event
        )
        invoke = self.invoker.invoke
        context.invoke_fanout = invoke  # bulk operations fan out as the sweeper function's async invokes
        self.schedule = Schedule(
            lambda event, lambda_context: sweeper_handler.handle(context, event, lambda_context, invoke=invoke),
            config.sweep_interval,
            stop=self.stop_event,
        )
        self.schedule.start()
        self.ready = True
        return self

    def client(self, service: str) -> Any:
        assert self.emulator is not None
        return boto3.client(
            service, endpoint_url=self.emulator.endpoint_url, region_name=self.config.region, config=AWS_CONFIG
        )

    def _disable_emulated_event_sources(self) -> None:
        """The pollers stand in for Lambda's SQS event source; the emulator's own must not run too.

        moto's mapping receives the timer queue's visible messages on every send to try a Docker
        invocation: under load that pushes timers past maxReceiveCount into the DLQ.
        """
        functions = self.client("lambda")
        for mapping in functions.list_event_source_mappings().get("EventSourceMappings", []):
            if mapping.get("State") != "Disabled":
                functions.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)

    def _lambda_environment(self) -> dict[str, str]:
        """The ingest function's environment as deployed, with the local overrides on top."""
        ingest = self.outputs[contract.OUTPUT_INGEST_FUNCTION]
        described = self.client("lambda").get_function_configuration(FunctionName=ingest)
        env = dict(described.get("Environment", {}).get("Variables", {}))
        env.update(
            {
                contract.SWEEP_INTERVAL: str(self.config.sweep_interval),
                contract.LOOKAHEAD: str(self.config.lookahead),
                contract.HANDOFF_SAFETY: str(self.config.handoff_safety),
                contract.ALLOW_PRIVATE_CALLBACKS: "1" if self.config.allow_private_callbacks else "0",
            }
        )
        if self.config.api_key and self.config.auth != contract.AUTH_IAM:  # under iam the signature is the key
            env[contract.API_KEY] = self.config.api_key
        if self.config.delivery_lease is not None:
            env[contract.DELIVERY_LEASE] = str(self.config.delivery_lease)
        if self.config.timer_hold is not None:
            env[contract.TIMER_HOLD] = str(self.config.timer_hold)
        if self.config.log_level:
            env[contract.LOG_LEVEL] = self.config.log_level
        return env

    def _build_context(self, endpoint: str) -> Context:
        assert self.settings is not None
        sqs = self.client("sqs")
        history = MinuteHistory()
        return Context(
            settings=self.settings,
            store=Store(self.settings.table, client=self.client("dynamodb")),
            timers=TimerQueue(self.settings.timer_queue_url, client=sqs),
            targets=SqsTargets(client=sqs),
            # No CloudWatch here: the console's charts read the runtime's own per-minute figures.
            metrics=Metrics(emit=False, history=history),
            metric_series=history,
            services=ServiceTargets.from_clients(self.client),
            body_store=BodyStore(self.settings.body_bucket, client=self.client("s3"))
            if self.settings.body_bucket
            else None,
        )

    @property
    def api_url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stops taking requests, then waits for every poller, sweep and invocation to end before the
        emulator goes: a thread left running would log into (and take the CPU from) whatever runs next."""
        self.ready = False
        self.stop_event.set()
        if self.gateway is not None:
            self.gateway.stop()
        deadline = time.monotonic() + timeout
        for worker in (self.pollers, self.dlq_poller, self.schedule, self.invoker):
            if worker is not None:
                worker.join(deadline)
        if self.emulator is not None:
            self.emulator.stop()
