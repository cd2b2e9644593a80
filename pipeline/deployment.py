"""Where the Hourglass deployment is and how it is laid out (arguments, else the stack's outputs).

Endpoint, region, table and timer queue; and the due-index layout and hand-off window the stack's
functions use, so that rows written by a job are keyed as the sweeper reads them.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from hourglass import contract
from hourglass.adapters.aws import AWS_CONFIG
from hourglass.core.handoff import Timing

STACK_NAME = "Hourglass"
# Argument -> the stack output that holds it.
TIMING_OUTPUTS = {
    "shards": contract.OUTPUT_SHARDS,
    "bucket_seconds": contract.OUTPUT_BUCKET_SECONDS,
    "lookahead": contract.OUTPUT_LOOKAHEAD,
    "handoff_safety": contract.OUTPUT_HANDOFF_SAFETY,
}
DEFAULT_REGION = "us-east-1"
# Emulators accept any key; a machine without AWS credentials can still talk to `make dev`.
_EMULATOR_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class DeploymentError(RuntimeError):
    """The table or timer queue could not be found."""


@dataclass(frozen=True)
class Deployment:
    """Plain strings only: it is pickled into every Spark task, which builds its own clients."""

    table: str
    timer_queue_url: str | None = None
    endpoint_url: str | None = None
    # The S3 bucket of large message bodies (stack output BodyBucketName); unset, bodies that do not
    # fit inline go to body items.
    body_bucket: str | None = None
    region: str = DEFAULT_REGION

    def client(self, service: str) -> Any:
        session = boto3.Session(region_name=self.region)
        if self.endpoint_url and session.get_credentials() is None:
            session = boto3.Session(region_name=self.region, **_EMULATOR_CREDENTIALS)
        return session.client(service, endpoint_url=self.endpoint_url, config=AWS_CONFIG)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("deployment")
    group.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="AWS endpoint, e.g. http://127.0.0.1:4566 for `make dev` (default: $AWS_ENDPOINT_URL)",
    )
    group.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    group.add_argument("--stack", default=STACK_NAME, help="CloudFormation stack whose outputs name the resources")
    group.add_argument("--table", help="DynamoDB table (default: the stack output TableName)")
    group.add_argument("--timer-queue-url", help="SQS timer queue (default: the stack output TimerQueueUrl)")


def resolve(args: argparse.Namespace, *, needs_timer_queue: bool) -> Deployment:
    """The deployment named by the arguments, asking the stack only for what they leave out."""
    base = Deployment(table=args.table or "", endpoint_url=args.endpoint_url, region=args.region or DEFAULT_REGION)
    table, queue_url, bucket = args.table, args.timer_queue_url, None
    if not table or (needs_timer_queue and not queue_url):
        outputs = stack_outputs(base, args.stack)
        table = table or outputs.get(contract.OUTPUT_TABLE)
        queue_url = queue_url or outputs.get(contract.OUTPUT_TIMER_QUEUE_URL)
        bucket = outputs.get(contract.OUTPUT_BODY_BUCKET)
    if not table or (needs_timer_queue and not queue_url):
        raise DeploymentError(
            f"stack {args.stack!r} has no TableName/TimerQueueUrl output; pass --table/--timer-queue-url"
        )
    return Deployment(
        table=table, timer_queue_url=queue_url, endpoint_url=base.endpoint_url, region=base.region, body_bucket=bucket
    )


def stack_outputs(deployment: Deployment, stack: str) -> dict[str, str]:
    try:
        stacks = deployment.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except (BotoCoreError, ClientError) as exc:
        where = deployment.endpoint_url or "AWS"
        raise DeploymentError(f"cannot read the outputs of stack {stack!r} at {where}: {exc}") from exc
    return {o["OutputKey"]: o.get("OutputValue", "") for o in stacks[0].get("Outputs", [])}


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout (default: the stack's outputs)")
    group.add_argument("--shards", type=int, help=f"due-index shards (stack output {contract.OUTPUT_SHARDS})")
    group.add_argument("--bucket-seconds", type=int, help=f"due-index bucket width ({contract.OUTPUT_BUCKET_SECONDS})")
    group.add_argument("--lookahead", type=float, help=f"seconds handed off ahead ({contract.OUTPUT_LOOKAHEAD})")
    group.add_argument("--handoff-safety", type=float, help=f"seconds added to it ({contract.OUTPUT_HANDOFF_SAFETY})")


def resolve_timing(args: argparse.Namespace, deployment: Deployment) -> Timing:
    """The deployed stack's layout; an argument given overrides its output (rows keyed otherwise are never swept)."""
    values: dict[str, float | None] = {name: getattr(args, name, None) for name in TIMING_OUTPUTS}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        outputs = stack_outputs(deployment, args.stack)
        for name in missing:
            if TIMING_OUTPUTS[name] not in outputs:
                flag = "--" + name.replace("_", "-")
                raise DeploymentError(f"stack {args.stack!r} has no {TIMING_OUTPUTS[name]} output; pass {flag}")
            values[name] = float(outputs[TIMING_OUTPUTS[name]])
    return Timing(
        shards=int(values["shards"] or 0),
        bucket_seconds=int(values["bucket_seconds"] or 0),
        lookahead=float(values["lookahead"] or 0),
        safety=float(values["handoff_safety"] or 0),
    )
