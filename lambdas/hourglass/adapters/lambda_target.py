"""Lambda targets: one asynchronous invocation (`Event`) per delivery, the envelope as the event."""

from __future__ import annotations

from hourglass.adapters import aws


class LambdaTargets(aws.LazyClient):
    service = "lambda"

    def invoke(self, function_arn: str, text: str) -> None:
        """Delivered once Lambda has queued the event (202); the function's own retries are Lambda's."""
        with aws.target_call("Lambda"):
            self.client.invoke(FunctionName=function_arn, InvocationType="Event", Payload=text.encode())
