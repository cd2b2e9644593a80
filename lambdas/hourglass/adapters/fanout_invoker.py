"""Fan-out: asynchronous invocations of the sweeper function itself (shards, or a bulk operation's segments)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.errors import InvokeError


class FanoutInvoker:
    def __init__(self, function_name: str, client: Any = None) -> None:
        self.function_name = function_name
        self.client = client or aws.client("lambda")
        self.invocations = 0

    def invoke(self, event: dict[str, Any]) -> None:
        """Queue one invocation (InvocationType=Event: Lambda retries it twice if it fails)."""
        try:
            self.client.invoke(
                FunctionName=self.function_name,
                InvocationType="Event",
                Payload=json.dumps(event, separators=(",", ":")).encode(),
            )
        except (ClientError, BotoCoreError) as exc:
            raise InvokeError(f"Lambda Invoke of {self.function_name} failed: {exc}") from exc
        self.invocations += 1
