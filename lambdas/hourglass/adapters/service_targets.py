"""The AWS service targets a delivery or a failure notice may go to (Lambda, SNS, EventBridge, Step Functions),
one adapter each, their clients built on first use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hourglass.adapters.eventbridge_target import EventBridgeTargets
from hourglass.adapters.lambda_target import LambdaTargets
from hourglass.adapters.sns_target import SnsTargets
from hourglass.adapters.stepfunctions_target import StepFunctionsTargets
from hourglass.core.model import AwsTarget, EventBridgeTarget, LambdaTarget, SnsTarget, StepFunctionsTarget


@dataclass
class ServiceTargets:
    functions: LambdaTargets = field(default_factory=LambdaTargets)
    topics: SnsTargets = field(default_factory=SnsTargets)
    buses: EventBridgeTargets = field(default_factory=EventBridgeTargets)
    machines: StepFunctionsTargets = field(default_factory=StepFunctionsTargets)

    @classmethod
    def from_clients(cls, client: Callable[[str], Any]) -> ServiceTargets:
        """Adapters on clients `client(service)` builds (an emulator's endpoint, a test's)."""
        return cls(
            LambdaTargets(client("lambda")),
            SnsTargets(client("sns")),
            EventBridgeTargets(client("events")),
            StepFunctionsTargets(client("stepfunctions")),
        )

    def send(self, target: AwsTarget, text: str, *, group: str, dedup_id: str, execution: str) -> None:
        """`text` to `target`; a refusal raises the judged DeliveryError. `group` and `dedup_id` serve FIFO
        topics, `execution` names a Step Functions execution."""
        if isinstance(target, LambdaTarget):
            self.functions.invoke(target.function_arn, text)
        elif isinstance(target, SnsTarget):
            self.topics.publish(target.topic_arn, text, group=group, dedup_id=dedup_id)
        elif isinstance(target, EventBridgeTarget):
            self.buses.put(target, text)
        elif isinstance(target, StepFunctionsTarget):
            self.machines.start(target.state_machine_arn, text, name=execution)
