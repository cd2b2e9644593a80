"""The embedded-moto SQS patch changes speed only: attributes and FIFO dedup behave as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devstack import moto_speed


@pytest.fixture
def sqs() -> Iterator[Any]:
    moto_speed.install()
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def test_queue_attributes_still_count_messages(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(3)])
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attributes["ApproximateNumberOfMessages"], attributes["ApproximateNumberOfMessagesDelayed"]) == ("3", "1")


def test_content_based_dedup_still_drops_repeats_on_fifo_queues(sqs: Any) -> None:
    url = sqs.create_queue(
        QueueName="ordered.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    for _ in range(2):
        sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["same"]


def test_install_twice_wraps_once() -> None:
    moto_speed.install()
    first = moto_speed.models.Queue.attributes
    moto_speed.install()
    assert moto_speed.models.Queue.attributes is first


def test_redrive_and_retention_attributes_read_as_before(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}
    url = sqs.create_queue(
        QueueName="main", Attributes={"RedrivePolicy": json.dumps(policy), "MessageRetentionPeriod": "600"}
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert [m["Body"] for m in got] == ["x"]
    assert json.loads(attributes["RedrivePolicy"]) == policy and attributes["MessageRetentionPeriod"] == "600"
