"""The three Hourglass Lambda functions (ingest, sweeper, dispatcher) and their log groups.

All three run from one code asset, the ``lambdas/`` directory with the tzdata package bundled next to
``hourglass/`` (lambda_package.py); boto3 comes from the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct
from hourglass.core import deadline, delivery_control

from stacks.constructs import lambda_package


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """Handler path and sizing of one function."""

    handler: str
    timeout: Duration
    memory_mb: int = 512


INGEST = FunctionSpec(handler="hourglass.handlers.api.handler", timeout=Duration.seconds(29))
SWEEPER = FunctionSpec(handler="hourglass.handlers.sweeper.handler", timeout=Duration.seconds(60))
# Long enough that no attempt is killed: a queue's `timeout` may be up to 120 s (core/deadline.py).
DISPATCHER = FunctionSpec(
    handler="hourglass.handlers.dispatcher.handler",
    timeout=Duration.seconds(deadline.function_timeout(delivery_control.MAX_TIMEOUT)),
    # Waits on the network, not the CPU (peak RSS 69 MB in bench/memory): 256 MB halves its GB-seconds.
    memory_mb=256,
)


class Functions(Construct):
    """Creates ``ingest``, ``sweeper`` and ``dispatcher``; permissions are granted by the stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code_dir: Path,
        environment: Mapping[str, str],
        ingest: FunctionSpec = INGEST,
        sweeper: FunctionSpec = SWEEPER,
        dispatcher: FunctionSpec = DISPATCHER,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        code = lambda_package.code(code_dir)
        env = dict(environment)

        def make(name: str, spec: FunctionSpec) -> lambda_.Function:
            log_group = logs.LogGroup(
                self,
                f"{name}Logs",
                retention=log_retention,
                removal_policy=RemovalPolicy.DESTROY,
            )
            return lambda_.Function(
                self,
                name,
                runtime=lambda_.Runtime.PYTHON_3_12,
                architecture=lambda_.Architecture.ARM_64,
                code=code,
                handler=spec.handler,
                timeout=spec.timeout,
                memory_size=spec.memory_mb,
                environment=env,
                log_group=log_group,
            )

        self.ingest = make("Ingest", ingest)
        self.sweeper = make("Sweeper", sweeper)
        self.dispatcher = make("Dispatcher", dispatcher)
