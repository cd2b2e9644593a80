"""In-process AWS (moto's mock_aws) with the stack's table and queues, and a service context."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import boto3
import pytest
from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.metrics import Metrics
from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.core.schedule import TIMER_HEAD_START
from hourglass.core.timestamps import from_ms
from hourglass.handlers import api as api_handler
from hourglass.service.context import Context
from hourglass.service.dispatch import Dispatcher
from hourglass.service.rest import Api
from hourglass.service.sweep import Sweeper
from hourglass.settings import Settings
from moto import mock_aws
from moto.sqs.models import sqs_backends

from bench import inprocess
from devstack import moto_atomic
from tests.conftest import FakeClock
from tests.faults.proxies import Serialized


def create_table(ddb: Any) -> str:
    """The stack's message table: keys and the sparse `due` index projecting `version`."""
    return inprocess.create_table(ddb, "messages", ("version", "flow_key", "priority"))


@dataclass
class Receiver:
    """Stands in for an HTTP callback server: records requests, answers from a script."""

    answers: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Scripts per URL, ahead of `answers`; a script's last answer repeats (an endpoint that stays so).
    by_url: dict[str, list[int]] = field(default_factory=dict)

    def __call__(self, url: str, body: bytes, headers: dict[str, str], **_: Any) -> HttpReply:
        self.requests.append({"url": url, "body": json.loads(body), "headers": headers})
        script = self.by_url.get(url)
        if script:
            status = script.pop(0) if len(script) > 1 else script[0]
        else:
            status = self.answers.pop(0) if self.answers else 200
        return HttpReply(status=status, headers={}, body=b'{"code": 100}')


@dataclass
class Harness:
    ctx: Context
    api: Api
    clock: FakeClock
    sqs: Any
    ddb: Any
    receiver: Receiver

    def call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> tuple[int, Any]:
        event = {
            "httpMethod": method,
            "path": path,
            "queryStringParameters": params,
            "headers": {"content-type": "application/json"},
            "body": None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        }
        response = api_handler.handle(self.api, event)
        text = response["body"]
        return response["statusCode"], json.loads(text) if text else None

    def sweep(self) -> Any:
        return Sweeper(self.ctx).run()

    def timers(self) -> list[dict[str, Any]]:
        """Drains the timer queue; the fake clock stands in for DelaySeconds, so delays are lifted."""
        backend = sqs_backends["123456789012"]["us-east-1"]
        for queue in backend.queues.values():
            for message in queue._messages:
                message.delayed_until = 0.0
        out: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.ctx.settings.timer_queue_url, MaxNumberOfMessages=10)
            messages = got.get("Messages", [])
            if not messages:
                return out
            for m in messages:
                out.append({"record": m["MessageId"], "body": m["Body"], "json": json.loads(m["Body"])})
                self.sqs.delete_message(QueueUrl=self.ctx.settings.timer_queue_url, ReceiptHandle=m["ReceiptHandle"])

    def dispatch(self, timers: list[dict[str, Any]]) -> list[str]:
        """Delivers timers the way SQS would: each once its delay has passed on the fake clock."""
        failed: list[str] = []
        for timer in sorted(timers, key=lambda t: t["json"]["due"]):
            visible = from_ms(timer["json"]["due"]) - timedelta(seconds=TIMER_HEAD_START)
            self.clock.now = max(self.clock.now, visible)
            failed += Dispatcher(self.ctx).run_batch([(timer["record"], timer["body"])])
        return failed

    def target_messages(self, queue_url: str) -> list[dict[str, Any]]:
        got = self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]


@contextmanager
def harness_for(clock: FakeClock) -> Iterator[Harness]:
    """A fresh in-process AWS and service context; for callers that are not pytest fixtures.

    moto applies a write in two steps and a query walks the table while other threads write: the service's
    thread pools (an operation's segments, a page's writers) would see conditions fail twice and queries
    fail now and then ("dictionary changed size", a 500 in one run of 2,300). `moto_atomic` makes its writes
    as atomic as DynamoDB's, and the table client takes one call at a time, as DynamoDB is safe to call."""
    moto_atomic.install()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        table = create_table(ddb)
        timer_url = sqs.create_queue(QueueName="timer")["QueueUrl"]
        # SQS targets the tests create are named target*; the timer queue never is.
        settings = Settings(table=table, timer_queue_url=timer_url, allow_private_callbacks=True, sqs_targets="target*")
        receiver = Receiver()
        ctx = Context(
            settings=settings,
            store=Store(table, client=Serialized(ddb, threading.Lock())),
            timers=TimerQueue(timer_url, client=sqs),
            targets=SqsTargets(client=sqs),
            metrics=Metrics(emit=False),
            clock=clock,
            sleep=clock.sleep,
            post=receiver,
            check_url=lambda url, allow_private: None,
        )
        yield Harness(ctx=ctx, api=Api(ctx), clock=clock, sqs=sqs, ddb=ddb, receiver=receiver)


@pytest.fixture
def harness(clock: FakeClock) -> Iterator[Harness]:
    with harness_for(clock) as started:
        yield started
