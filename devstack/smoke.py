"""Deployment smoke test: schedules a few messages to an SQS queue it creates, checks on-time delivery, cleans up.

Runs against real AWS (`make smoke API_URL=... API_KEY=...`, credentials from the usual AWS chain) and,
with AWS_ENDPOINT_URL set, against a stack deployed into an emulator.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3

from devstack import api_call

DELAYS = (2, 4, 6)
# How late a delivery may be and still pass: SQS, a Lambda cold start and the network.
LATE_LIMIT = 5.0


class SmokeFailure(RuntimeError):
    """The deployed stack did not do what the smoke test asked of it."""


@dataclass(frozen=True)
class Delivery:
    body: str
    lateness: float


def call(api_url: str, api_key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return api_call.call(api_url, method, path, body, api_key=api_key)


def expect(status: int, wanted: int, doc: Any, what: str) -> None:
    if status != wanted:
        raise SmokeFailure(f"{what}: HTTP {status} (expected {wanted}): {doc}")


def run(
    api_url: str, api_key: str, *, region: str | None = None, timeout: float = 60.0, late_limit: float = LATE_LIMIT
) -> list[Delivery]:
    """Schedule len(DELAYS) messages to a fresh SQS queue; return each delivery's lateness in seconds."""
    status, doc = call(api_url, api_key, "GET", "/health")
    expect(status, 200, doc, "GET /health")
    sqs = boto3.client("sqs", region_name=region)
    suffix = uuid.uuid4().hex[:10]
    target = sqs.create_queue(QueueName=f"hourglass-smoke-{suffix}")["QueueUrl"]
    queue = f"smoke-{suffix}"
    try:
        status, doc = call(
            api_url, api_key, "PUT", f"/v1/queues/{queue}", {"target": {"type": "sqs", "queue_url": target}}
        )
        expect(status, 201, doc, f"PUT /v1/queues/{queue}")
        messages = [{"body": f"smoke-{delay}", "delay": delay} for delay in DELAYS]
        status, doc = call(api_url, api_key, "POST", f"/v1/queues/{queue}/messages", {"messages": messages})
        expect(status, 201, doc, f"POST /v1/queues/{queue}/messages")
        due = {
            f"smoke-{delay}": _epoch(created["due_at"]) for delay, created in zip(DELAYS, doc["messages"], strict=True)
        }
        return _receive(sqs, target, due, timeout, late_limit)
    finally:
        call(api_url, api_key, "DELETE", f"/v1/queues/{queue}")
        sqs.delete_queue(QueueUrl=target)


def _receive(sqs: Any, target: str, due: dict[str, float], timeout: float, late_limit: float) -> list[Delivery]:
    deliveries: dict[str, Delivery] = {}
    deadline = time.monotonic() + max(DELAYS) + timeout
    while len(deliveries) < len(due) and time.monotonic() < deadline:
        got = sqs.receive_message(
            QueueUrl=target, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"]
        )
        for message in got.get("Messages", []):
            body = json.loads(message["Body"])["body"]
            sent = int(message["Attributes"]["SentTimestamp"]) / 1000
            if body in due:
                deliveries.setdefault(body, Delivery(body, sent - due[body]))
            sqs.delete_message(QueueUrl=target, ReceiptHandle=message["ReceiptHandle"])
    missing = sorted(set(due) - set(deliveries))
    if missing:
        raise SmokeFailure(f"not delivered within {timeout:g} s of their due time: {missing}")
    ordered = [deliveries[body] for body in due]
    for delivery in ordered:
        if not 0 <= delivery.lateness < late_limit:
            raise SmokeFailure(f"{delivery.body}: delivered {delivery.lateness:+.3f} s from its due time")
    return ordered


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--api-url", required=True, help="the stack's ApiUrl output")
    parser.add_argument("--api-key", required=True, help="the API key's value")
    parser.add_argument("--region", default=None, help="the stack's region (default: the AWS chain's)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds past the last due time to wait")
    parser.add_argument(
        "--late-limit",
        type=float,
        default=LATE_LIMIT,
        help=f"seconds late a delivery may be and pass (default {LATE_LIMIT:g}; more on a busy emulator)",
    )
    args = parser.parse_args(argv)
    if not args.api_url or not args.api_key:
        parser.error("--api-url and --api-key are required (make smoke API_URL=... API_KEY=...)")
    try:
        deliveries = run(
            args.api_url, args.api_key, region=args.region, timeout=args.timeout, late_limit=args.late_limit
        )
    except SmokeFailure as failure:
        print(f"smoke: FAILED: {failure}", file=sys.stderr)
        return 1
    for delivery in deliveries:
        print(f"smoke: {delivery.body} delivered {delivery.lateness * 1000:.0f} ms after due")
    print(f"smoke: OK, {len(deliveries)} messages on time; the test queues are deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
