"""Settings read from the environment, in this one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from hourglass import contract
from hourglass.core.aws_targets import KINDS, ArnRule
from hourglass.core.handoff import Timing
from hourglass.core.schedule import MAX_TIMER_DELAY
from hourglass.core.sqs_targets import SqsTargetRule
from hourglass.errors import ValidationError


@dataclass(frozen=True)
class Settings:
    table: str
    timer_queue_url: str
    shards: int = contract.DEFAULT_SHARDS
    lookahead: float = contract.DEFAULT_LOOKAHEAD
    sweep_interval: float = contract.DEFAULT_SWEEP_INTERVAL
    retention_days: float = contract.DEFAULT_RETENTION_DAYS
    allow_private_callbacks: bool = False
    api_key: str | None = None
    bucket_seconds: int = contract.DEFAULT_BUCKET_SECONDS
    handoff_safety: float = contract.DEFAULT_HANDOFF_SAFETY
    # How long a delivery attempt owns its message (a queue with a longer timeout extends it); a
    # timer that comes back while the lease runs is handed out again when it ends.
    delivery_lease: float = contract.DEFAULT_DELIVERY_LEASE
    # How long ahead a running dispatcher keeps its timer records hidden (its heartbeat renews it):
    # what a dispatcher that dies held is handed out again this soon.
    timer_hold: float = contract.DEFAULT_TIMER_HOLD
    # Due entries one sweeper invocation claims within its time limit; a scheduled sweep that
    # expects more splits the shards among fan-out invocations (docs/capacity.md).
    sweep_capacity: int = contract.DEFAULT_SWEEP_CAPACITY
    # The function fan-out invocations go to; unset, the sweeper invokes itself (its own name).
    sweeper_function: str | None = None
    # The S3 bucket of bodies too large for a body item (docs/design.md, "Message bodies"); unset,
    # such bodies cannot be stored.
    body_bucket: str | None = None
    # The crash switch (`service.crash_switch`): None in any real deployment.
    crash_at: str | None = None
    # None leaves the log level as it is (INFO unless set).
    log_level: str | None = None
    # Whether the table has the `created` list index (an operator may drop it: one write unit per message).
    order_created: bool = True
    # Whether the table has the `list` index of `order=due` (an operator may drop it: one write unit per message).
    order_due: bool = True

    @property
    def timing(self) -> Timing:
        return Timing(self.shards, self.bucket_seconds, self.lookahead, self.handoff_safety)

    @property
    def retention(self) -> timedelta:
        """How long a finished message is kept."""
        return timedelta(days=self.retention_days)

    # Allowed SQS targets (core.sqs_targets): ARNs, names, `prefix*`; empty allows none.
    sqs_targets: str = ""
    timer_dlq_url: str = ""
    # Allowed AWS service targets by type (core.aws_targets): ARN or name patterns; empty allows none.
    lambda_targets: str = ""
    sns_targets: str = ""
    eventbridge_targets: str = ""
    stepfunctions_targets: str = ""
    # The stack's name: every resource it made is named `<stack name>-...` and is never a target.
    stack_name: str = ""

    def service_targets(self, kind: str) -> str:
        """The allow-list setting of an AWS service target type (`lambda`, `sns`, ...)."""
        return str(getattr(self, f"{kind}_targets"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        c = contract
        settings = cls(
            table=env.get(c.TABLE, ""),
            timer_queue_url=env.get(c.TIMER_QUEUE_URL, ""),
            shards=int(env.get(c.SHARDS, str(c.DEFAULT_SHARDS))),
            lookahead=float(env.get(c.LOOKAHEAD, str(c.DEFAULT_LOOKAHEAD))),
            sweep_interval=float(env.get(c.SWEEP_INTERVAL, str(c.DEFAULT_SWEEP_INTERVAL))),
            retention_days=float(env.get(c.RETENTION_DAYS, str(c.DEFAULT_RETENTION_DAYS))),
            allow_private_callbacks=env.get(c.ALLOW_PRIVATE_CALLBACKS, "0") == "1",
            api_key=env.get(c.API_KEY) or None,
            handoff_safety=float(env.get(c.HANDOFF_SAFETY, str(c.DEFAULT_HANDOFF_SAFETY))),
            delivery_lease=float(env.get(c.DELIVERY_LEASE, str(c.DEFAULT_DELIVERY_LEASE))),
            timer_hold=float(env.get(c.TIMER_HOLD, str(c.DEFAULT_TIMER_HOLD))),
            sweep_capacity=int(env.get(c.SWEEP_CAPACITY, str(c.DEFAULT_SWEEP_CAPACITY))),
            sweeper_function=env.get(c.SWEEPER_FUNCTION) or None,
            log_level=env.get(c.LOG_LEVEL) or None,
            body_bucket=env.get(c.BODY_BUCKET) or None,
            sqs_targets=env.get(c.SQS_TARGETS, ""),
            timer_dlq_url=env.get(c.TIMER_DLQ_URL, ""),
            stack_name=env.get(c.STACK_NAME, ""),
            lambda_targets=env.get(c.SERVICE_TARGETS["lambda"], ""),
            sns_targets=env.get(c.SERVICE_TARGETS["sns"], ""),
            eventbridge_targets=env.get(c.SERVICE_TARGETS["eventbridge"], ""),
            stepfunctions_targets=env.get(c.SERVICE_TARGETS["stepfunctions"], ""),
            crash_at=env.get(c.CRASH_AT) or None,
            order_created=env.get(c.ORDER_CREATED, "1") != "0",
            order_due=env.get(c.ORDER_DUE, "1") != "0",
        )
        settings.check()
        return settings

    def check(self) -> None:
        try:
            SqsTargetRule.parse(self.sqs_targets)
        except ValueError as exc:
            raise ValidationError("HOURGLASS_SQS_TARGETS", str(exc)) from exc
        for kind, name in contract.SERVICE_TARGETS.items():
            try:
                ArnRule.parse(KINDS[kind], self.service_targets(kind))
            except ValueError as exc:
                raise ValidationError(name, str(exc)) from exc
        if not 0 < self.delivery_lease <= 3600:
            raise ValidationError(contract.DELIVERY_LEASE, "must be between 0 and 3600 seconds")
        if not 1 <= self.timer_hold <= 900:
            raise ValidationError(contract.TIMER_HOLD, "must be between 1 and 900 seconds")
        if self.crash_at is not None and self.crash_at not in contract.CRASH_PHASES:
            raise ValidationError(contract.CRASH_AT, f"must be one of {', '.join(contract.CRASH_PHASES)}")
        if self.sweep_capacity < 1:
            raise ValidationError(contract.SWEEP_CAPACITY, "must be at least 1")
        if not 1 <= self.shards <= 1000:
            raise ValidationError(contract.SHARDS, "must be between 1 and 1000")
        if not self.sweep_interval < self.lookahead <= MAX_TIMER_DELAY:
            raise ValidationError(
                contract.LOOKAHEAD,
                f"must be > {contract.SWEEP_INTERVAL} ({self.sweep_interval:g}) and <= {MAX_TIMER_DELAY}",
            )
