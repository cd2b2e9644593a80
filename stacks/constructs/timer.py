"""The SQS timer queue that carries hand-offs to the dispatcher, and its dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DLQ_RETENTION = Duration.days(14)


class TimerQueueWithDlq(Construct):
    """Timer queue (SQS-managed encryption) redriving to a DLQ after ``max_receive_count``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout: Duration,
        max_receive_count: int = 10,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            retention_period=DLQ_RETENTION,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            visibility_timeout=visibility_timeout,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=max_receive_count),
        )
