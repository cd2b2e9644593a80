"""SNS targets: one publish per delivery; FIFO topics get a group and deduplication id."""

from __future__ import annotations

from typing import Any

from hourglass.adapters import aws


class SnsTargets(aws.LazyClient):
    service = "sns"

    def publish(self, topic_arn: str, text: str, *, group: str, dedup_id: str) -> None:
        """Delivered once SNS has stored the message (it returned a MessageId); fan-out is SNS's."""
        kwargs: dict[str, Any] = {"TopicArn": topic_arn, "Message": text}
        if topic_arn.endswith(".fifo"):
            kwargs["MessageGroupId"] = group
            kwargs["MessageDeduplicationId"] = dedup_id
        with aws.target_call("SNS"):
            self.client.publish(**kwargs)
