"""CloudWatch Logs bytes per delivered message: what the handlers print (log lines and EMF) at INFO.

Messages go through the three handlers in process (moto's mock_aws, a fixed clock): one POST, one
scheduled sweep, one dispatcher batch; every line written to stdout is captured and counted.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from hourglass.adapters.metrics import Metrics
from hourglass.handlers import api as api_handler
from hourglass.handlers import dispatcher as dispatcher_handler
from hourglass.handlers import sweeper as sweeper_handler
from hourglass.service.dispatch import Dispatcher
from hourglass.service.rest import Api
from moto import mock_aws

from bench import inprocess

DAY = 86400
START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
# Lambda's own lines per invocation (START, END, REPORT with an init duration), text format.
PLATFORM_BYTES_PER_INVOCATION = 330
RUNTIME_THREADS = ("poller-", "schedule", "invoke")


@dataclass
class Captured:
    messages: int
    lines: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(len(line.encode()) + 1 for line in self.lines)

    @property
    def emf_documents(self) -> int:
        return sum(1 for line in self.lines if '"_aws"' in line)

    @property
    def per_message(self) -> float:
        return self.bytes / max(1, self.messages)


@contextmanager
def _capture(level: int) -> Iterator[io.StringIO]:
    """Every line of the `hourglass` logger, at `level`, into one buffer (metrics write there too).

    A local runtime's threads (pollers, schedule, invokes) are not counted: one left running by
    someone else in the same process logs to the same logger.
    """
    out = io.StringIO()
    logger = logging.getLogger("hourglass")
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(lambda record: not str(record.threadName).startswith(RUNTIME_THREADS))
    saved = (logger.level, list(logger.handlers), logger.propagate)
    logger.handlers = [handler]
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield out
    finally:
        logger.setLevel(saved[0])
        logger.handlers = saved[1]
        logger.propagate = saved[2]


def _event(method: str, path: str, doc: Any) -> dict[str, Any]:
    return {"httpMethod": method, "path": path, "headers": {}, "body": json.dumps(doc)}


def measure(messages: int = 1, *, level: int = logging.INFO, body: Any = "x" * 100) -> Captured:
    """Log bytes of `messages` delivered to an SQS target: one POST, one sweep, one dispatcher batch."""
    clock = [START]
    with mock_aws(), _capture(level) as out:
        aws = inprocess.create(boto3.client("dynamodb", "us-east-1"), boto3.client("sqs", "us-east-1"))
        target = aws.sqs.create_queue(QueueName="target")["QueueUrl"]
        ctx = inprocess.context(aws, lambda: clock[0])
        ctx.metrics = Metrics(stream=out, emit=True)
        api = Api(ctx)
        api_handler.handle(api, _event("PUT", "/v1/queues/q", {"target": {"type": "sqs", "queue_url": target}}))
        start = out.tell()
        batch = {"messages": [{"body": body, "delay": DAY} for _ in range(messages)]}
        created = api_handler.handle(api, _event("POST", "/v1/queues/q/messages", batch))
        assert created["statusCode"] == 201, created
        # Just before the due time, so the timer has no SQS delay and can be received at once.
        clock[0] = START + timedelta(seconds=DAY) - timedelta(milliseconds=500)
        sweeper_handler.handle(ctx, {}, None)
        records = aws.sqs.receive_message(QueueUrl=aws.timer_url, MaxNumberOfMessages=10).get("Messages", [])
        clock[0] = START + timedelta(seconds=DAY, milliseconds=20)
        event = {"Records": [{"messageId": r["MessageId"], "body": r["Body"]} for r in records]}
        answer = dispatcher_handler.handle(Dispatcher(ctx), event)
        delivered = aws.sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["ApproximateNumberOfMessages"])
        count = int(delivered["Attributes"]["ApproximateNumberOfMessages"])
        if answer["batchItemFailures"] or count != messages:
            raise RuntimeError(f"log measurement delivered {count} of {messages}: {answer}")
        text = out.getvalue()[start:]
    return Captured(messages, [line for line in text.splitlines() if line])


if __name__ == "__main__":
    for n in (1, 10):
        c = measure(n)
        print(f"{n} messages: {c.bytes} bytes, {c.per_message:.0f} per message, {len(c.lines)} lines, "
              f"{c.emf_documents} EMF documents")
        for line in c.lines:
            print("   ", line[:160])
