"""The embedded emulator refuses what AWS refuses: items over 400 KB, transactions over 100 items,
SQS messages over the queue's MaximumMessageSize counted in UTF-8 bytes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from bench import inprocess
from devstack.emulator import Emulator, free_port


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    started = Emulator.start(free_port())
    yield started
    started.stop()


def client(emulator: Emulator, service: str) -> Any:
    return boto3.client(service, endpoint_url=emulator.endpoint_url, region_name="us-east-1")


def error_code(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return str(info.value.response["Error"]["Code"])


@pytest.fixture(scope="module")
def table(emulator: Emulator) -> str:
    return inprocess.create_table(client(emulator, "dynamodb"), "limits", ("id",))


def item(key: str, size: int) -> dict[str, Any]:
    return {"pk": {"S": key}, "sk": {"S": "m#1"}, "body": {"S": "é" * (size // 2)}}


def test_an_item_over_400_kb_in_utf8_bytes_is_a_validation_exception(emulator: Emulator, table: str) -> None:
    ddb = client(emulator, "dynamodb")
    # 210,000 characters: under 400 KB counted in characters, 420,000 bytes in UTF-8.
    assert error_code(ddb.put_item, TableName=table, Item=item("big", 420_000)) == "ValidationException"
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "big"}, "sk": {"S": "m#1"}})


def test_an_item_under_the_limit_is_stored(emulator: Emulator, table: str) -> None:
    ddb = client(emulator, "dynamodb")
    ddb.put_item(TableName=table, Item=item("fits", 390_000))
    assert "Item" in ddb.get_item(TableName=table, Key={"pk": {"S": "fits"}, "sk": {"S": "m#1"}})


def test_a_transaction_of_more_than_100_items_is_refused(emulator: Emulator, table: str) -> None:
    ddb = client(emulator, "dynamodb")
    writes = [{"Put": {"TableName": table, "Item": {"pk": {"S": "t"}, "sk": {"S": f"m#{i}"}}}} for i in range(101)]
    assert error_code(ddb.transact_write_items, TransactItems=writes) == "ValidationException"


def test_an_sqs_message_over_the_queue_limit_in_utf8_bytes_is_refused(emulator: Emulator) -> None:
    sqs = client(emulator, "sqs")
    url = sqs.create_queue(QueueName="sized", Attributes={"MaximumMessageSize": str(256 * 1024)})["QueueUrl"]
    # 200,000 characters pass moto's own check (it counts characters); they are 400,000 bytes.
    assert error_code(sqs.send_message, QueueUrl=url, MessageBody="é" * 200_000) == "InvalidParameterValue"
    sqs.send_message(QueueUrl=url, MessageBody="é" * 131_000)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(attributes["ApproximateNumberOfMessages"]) == 1
