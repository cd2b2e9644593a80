"""Step Functions targets: one execution per attempt, named after the message id and attempt."""

from __future__ import annotations

from botocore.exceptions import ClientError

from hourglass.adapters import aws


class StepFunctionsTargets(aws.LazyClient):
    service = "stepfunctions"

    def start(self, state_machine_arn: str, text: str, *, name: str) -> None:
        """Delivered once the execution `name` has started, by this call or an earlier one of the same attempt:
        the service refuses a second start of that name (ExecutionAlreadyExists) instead of running it twice."""
        with aws.target_call("Step Functions"):
            try:
                self.client.start_execution(stateMachineArn=state_machine_arn, name=name, input=text)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                    raise
