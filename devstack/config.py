"""The local runtime's settings, read from the environment in this one place."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hourglass import contract as c
from hourglass.settings import Settings

# SQS targets `make dev` allows unless HOURGLASS_SQS_TARGETS says otherwise: queues named for the
# tests, the sample and the benchmarks (never the timer queue, which create refuses anyway).
LOCAL_SQS_TARGETS = "target*,hourglass-*,bench-*"
# The same names allowed for every AWS service target type (Lambda, SNS, EventBridge, Step Functions).
LOCAL_SERVICE_TARGETS = LOCAL_SQS_TARGETS

# Where the crash switch stops an attempt: its timer received (before the begin write), begun (before
# the request), delivered (before the outcome write).
CRASH_PHASES = c.CRASH_PHASES
# The fields that are the functions' own settings (hourglass.settings), read from the same variables.
FUNCTION_SETTINGS = (
    "sweep_interval", "lookahead", "allow_private_callbacks", "api_key", "handoff_safety", "shards", "log_level",
    "sqs_targets", "lambda_targets", "sns_targets", "eventbridge_targets", "stepfunctions_targets", "order_created",
    "order_due",
)  # fmt: skip

DEPLOY_MODES = {"": "inprocess", "inprocess": "inprocess", "moto": "inprocess", "cdk": "cdk", "ministack": "cdk"}


def crash_phase(value: str) -> str | None:
    phase = value.strip().lower() or None
    if phase is not None and phase not in CRASH_PHASES:
        raise ValueError(f"HOURGLASS_CRASH_AT={value!r}: expected one of {', '.join(CRASH_PHASES)}")
    return phase


def auth_mode(value: str) -> str:
    mode = value.strip().lower() or c.AUTH_API_KEY
    if mode not in c.AUTH_MODES:
        raise ValueError(f"HOURGLASS_AUTH={value!r}: expected one of {', '.join(c.AUTH_MODES)}")
    return mode


def deploy_mode(value: str) -> str:
    try:
        return DEPLOY_MODES[value.strip().lower()]
    except KeyError:
        expected = "'cdk' (deployed into MiniStack) or 'inprocess'"
        raise ValueError(f"HOURGLASS_DEPLOY={value!r}: expected {expected}") from None


def function_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The functions' variables as the local runtime runs them: `env` over the local defaults."""
    local = {c.ALLOW_PRIVATE_CALLBACKS: "1", c.SQS_TARGETS: LOCAL_SQS_TARGETS}
    local.update({name: LOCAL_SERVICE_TARGETS for name in c.SERVICE_TARGETS.values()})
    return {**local, **env}


def target_exports(env: Mapping[str, str]) -> str:
    """Shell exports of the variables the local functions check targets against, for a job that checks them
    as they do (`make spark-schedule`: eval "$(python -m devstack.config)")."""
    functions = function_environment(env)
    names = (c.SQS_TARGETS, *c.SERVICE_TARGETS.values(), c.ALLOW_PRIVATE_CALLBACKS)
    return "\n".join(f"export {name}={shlex.quote(functions[name])}" for name in names)


@dataclass(frozen=True)
class RuntimeConfig:
    api_port: int = 8080
    emulator_port: int = 4566
    endpoint_url: str | None = None
    sweep_interval: float = c.DEFAULT_SWEEP_INTERVAL
    lookahead: float = c.DEFAULT_LOOKAHEAD
    allow_private_callbacks: bool = True
    api_key: str | None = None
    handoff_safety: float = c.DEFAULT_HANDOFF_SAFETY
    shards: int = c.DEFAULT_SHARDS
    region: str = "us-east-1"
    dispatcher_threads: int = 4
    # Seconds a received timer stays hidden from other pollers; None keeps the queue's own (360 s).
    poll_visibility: int | None = None
    log_level: str | None = None
    sqs_targets: str = LOCAL_SQS_TARGETS
    lambda_targets: str = LOCAL_SERVICE_TARGETS
    sns_targets: str = LOCAL_SERVICE_TARGETS
    eventbridge_targets: str = LOCAL_SERVICE_TARGETS
    stepfunctions_targets: str = LOCAL_SERVICE_TARGETS
    # "inprocess": handlers in this process on moto; "cdk": `cdk deploy` into MiniStack, Lambdas there.
    deploy: str = "inprocess"
    # Fault switch for the crash benchmark (devstack.crash): every attempt that reaches this phase
    # stops there, and the process kills itself (SIGKILL) `crash_after` seconds after the first did.
    crash_at: str | None = None
    crash_after: float = 3.0
    # As the stack's `hourglass:auth`: "iam" and "both" make the local gateway require SigV4 signatures by the
    # emulator's credentials (devstack.sigv4); "both" also needs HOURGLASS_API_KEY's key when it is set.
    auth: str = c.AUTH_API_KEY
    # The stack's `hourglass:order_created` (HOURGLASS_ORDER_CREATED=0: no `created` list index).
    order_created: bool = True
    # The stack's `hourglass:order_due` (HOURGLASS_ORDER_DUE=0: no `list` index, `order=due` is a 400).
    order_due: bool = True
    # The embedded emulator's state across restarts (devstack.moto_state); None: in memory only.
    state_file: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeConfig:
        env = os.environ if env is None else env
        # The functions' settings are read as the functions read them; only the local defaults differ.
        engine = Settings.from_env(function_environment(env))
        return cls(
            api_port=int(env.get("HOURGLASS_API_PORT", "8080")),
            emulator_port=int(env.get("HOURGLASS_EMULATOR_PORT", "4566")),
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            dispatcher_threads=int(env.get("HOURGLASS_DISPATCHER_WORKERS", "4")),  # poller threads
            poll_visibility=int(env["HOURGLASS_POLL_VISIBILITY"]) if env.get("HOURGLASS_POLL_VISIBILITY") else None,
            deploy=deploy_mode(env.get("HOURGLASS_DEPLOY", "")),
            crash_at=crash_phase(env.get("HOURGLASS_CRASH_AT", "")),
            crash_after=float(env.get("HOURGLASS_CRASH_AFTER", "3")),
            auth=auth_mode(env.get("HOURGLASS_AUTH", "")),
            state_file=Path(env["HOURGLASS_STATE"]) if env.get("HOURGLASS_STATE") else None,
            **{name: getattr(engine, name) for name in FUNCTION_SETTINGS},
        )

    @property
    def signed(self) -> bool:
        """Whether requests need a SigV4 signature."""
        return self.auth in (c.AUTH_IAM, c.AUTH_BOTH)

    @property
    def delivery_lease(self) -> float | None:
        """A delivery lease that ends well before a timer comes back after its dispatcher died."""
        return None if self.poll_visibility is None else max(1.0, self.poll_visibility / 2)

    @property
    def timer_hold(self) -> int | None:
        """A short poll visibility is the dispatchers' hold too (a longer hold would undo it)."""
        return self.poll_visibility

    def cdk_context(self) -> dict[str, object]:
        return {
            "hourglass:lookahead": self.lookahead,
            "hourglass:shards": self.shards,
            "hourglass:allow_private_callbacks": self.allow_private_callbacks,
            "hourglass:sweep_interval": self.sweep_interval,
            "hourglass:sqs_targets": self.sqs_targets,
            "hourglass:lambda_targets": self.lambda_targets,
            "hourglass:sns_targets": self.sns_targets,
            "hourglass:eventbridge_targets": self.eventbridge_targets,
            "hourglass:stepfunctions_targets": self.stepfunctions_targets,
            "hourglass:order_created": self.order_created,
            "hourglass:order_due": self.order_due,
        }


if __name__ == "__main__":
    print(target_exports(os.environ))
