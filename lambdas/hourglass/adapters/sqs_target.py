"""SQS targets: one message per delivery; FIFO queues get a group and deduplication id."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.errors import DeliveryError

PERMANENT_CODES = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidParameterValue",
        "InvalidMessageContents",
        "KMS.AccessDeniedException",
    }
)


class SqsTargets:
    def __init__(self, client: Any = None) -> None:
        self.client = client or aws.client("sqs")

    def send(self, queue_url: str, body: str, *, group: str, dedup_id: str) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
        if queue_url.endswith(".fifo"):
            kwargs["MessageGroupId"] = group
            kwargs["MessageDeduplicationId"] = dedup_id
        try:
            self.client.send_message(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            raise DeliveryError(f"SQS {code}: {exc}", retryable=code not in PERMANENT_CODES) from exc
        except BotoCoreError as exc:
            raise DeliveryError(f"SQS connection: {exc}", retryable=True) from exc
