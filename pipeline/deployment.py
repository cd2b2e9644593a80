"""Where the Hourglass deployment is: endpoint, region, table and timer queue (arguments or stack outputs)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from hourglass.adapters.aws import AWS_CONFIG

STACK_NAME = "Hourglass"
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
    table, queue_url = args.table, args.timer_queue_url
    if not table or (needs_timer_queue and not queue_url):
        outputs = stack_outputs(base, args.stack)
        table = table or outputs.get("TableName")
        queue_url = queue_url or outputs.get("TimerQueueUrl")
    if not table or (needs_timer_queue and not queue_url):
        raise DeploymentError(
            f"stack {args.stack!r} has no TableName/TimerQueueUrl output; pass --table/--timer-queue-url"
        )
    return Deployment(table=table, timer_queue_url=queue_url, endpoint_url=base.endpoint_url, region=base.region)


def stack_outputs(deployment: Deployment, stack: str) -> dict[str, str]:
    try:
        stacks = deployment.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except (BotoCoreError, ClientError) as exc:
        where = deployment.endpoint_url or "AWS"
        raise DeploymentError(f"cannot read the outputs of stack {stack!r} at {where}: {exc}") from exc
    return {o["OutputKey"]: o.get("OutputValue", "") for o in stacks[0].get("Outputs", [])}
