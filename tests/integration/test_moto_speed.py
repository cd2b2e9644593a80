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


def test_a_delayed_message_is_not_received_before_its_delay(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="timers")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    sqs.send_message(QueueUrl=url, MessageBody="now")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["now"]


def test_a_deleted_message_is_gone_and_deleting_it_again_is_fine(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(3)])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
    first = next(m for m in got if m["Body"] == "1")
    for _ in range(2):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in left) == ["0", "2"]


def test_an_earlier_receipt_handle_still_deletes_its_message(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="again")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    earlier = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=earlier)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_an_unknown_receipt_handle_is_refused(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="strict")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")


def test_paged_range_queries_return_each_item_once_in_order() -> None:
    moto_speed.install()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        )
        keys = [f"m#{i:03x}" for i in range(0, 4096, 7)]
        for pk in ("q", "other"):
            for sk in keys:
                ddb.put_item(TableName="t", Item={"pk": {"S": pk}, "sk": {"S": sk}})
        request: dict[str, Any] = {
            "TableName": "t",
            "KeyConditionExpression": "pk = :q AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":q": {"S": "q"}, ":lo": {"S": "m#4"}, ":hi": {"S": "m#9~"}},
            "Limit": 9,
        }
        seen: list[str] = []
        while True:
            page = ddb.query(**request)
            seen += [item["sk"]["S"] for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        assert seen == [k for k in keys if "m#4" <= k <= "m#9~"]


def test_items_of_every_attribute_type_read_back_as_written() -> None:
    moto_speed.install()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        )
        plain = {"pk": {"S": "q"}, "sk": {"S": "a"}, "n": {"N": "1.5"}, "t": {"BOOL": True}, "z": {"NULL": True}}
        mixed = {
            **plain,
            "sk": {"S": "b"},
            "ss": {"SS": ["x", "y"]},
            "ns": {"NS": ["1", "2"]},
            "b": {"B": b"\x00\x01"},
            "m": {"M": {"inner": {"S": "v"}, "bin": {"B": b"\xff"}}},
            "l": {"L": [{"N": "3"}, {"BS": [b"\x02"]}]},
        }
        for item in (plain, mixed):
            ddb.put_item(TableName="t", Item=item)
        got = ddb.query(TableName="t", KeyConditionExpression="pk = :q", ExpressionAttributeValues={":q": {"S": "q"}})[
            "Items"
        ]
        assert got == [plain, mixed]
        assert ddb.get_item(TableName="t", Key={"pk": {"S": "q"}, "sk": {"S": "b"}})["Item"] == mixed
