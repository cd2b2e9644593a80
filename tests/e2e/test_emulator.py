"""The embedded emulator: its own process, gone with the runtime, and as atomic as DynamoDB and SQS."""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench import inprocess, modes
from devstack.emulator import Emulator, free_port, port_is_free


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    started = Emulator.start(free_port())
    yield started
    started.stop()


def test_the_embedded_emulator_serves_from_a_process_of_its_own(emulator: Emulator) -> None:
    url = client(emulator.endpoint_url, "sqs").create_queue(QueueName="q")["QueueUrl"]
    assert url.endswith("/q")
    assert emulator.process is not None and emulator.cpu_seconds() > 0


def _post(connection: http.client.HTTPConnection, target: str, body: bytes) -> tuple[int, str | None]:
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target}
    connection.request("POST", "/", body=body, headers=headers)
    reply = connection.getresponse()
    reply.read()
    return reply.status, reply.getheader("Connection")


def test_the_emulator_keeps_a_connection_open_for_the_next_request(emulator: Emulator) -> None:
    host, port = emulator.endpoint_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    answers = [_post(connection, "DynamoDB_20120810.ListTables", b"{}") for _ in range(3)]
    sock = connection.sock
    assert answers == [(200, None)] * 3 and sock is not None
    connection.close()


def test_a_request_body_the_emulator_does_not_read_leaves_the_next_request_whole(emulator: Emulator) -> None:
    host, port = emulator.endpoint_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    connection.request("GET", "/moto-api/data.json", body=b"x" * 5000)
    connection.getresponse().read()
    assert _post(connection, "DynamoDB_20120810.ListTables", b"{}") == (200, None)
    connection.close()


def test_stopping_the_emulator_frees_its_port() -> None:
    port = free_port()
    Emulator.start(port).stop()
    assert port_is_free(port)


def test_a_killed_runtime_takes_its_emulator_with_it() -> None:
    port = free_port()
    script = (
        "import sys, threading; from devstack.emulator import Emulator; "
        f"e = Emulator.start({port}); print(e.process.pid, flush=True); threading.Event().wait()"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not port_is_free(port):
        time.sleep(0.1)
    assert port_is_free(port), f"emulator {child_pid} outlived its runtime"


def test_concurrent_conditional_writes_let_exactly_one_through(emulator: Emulator) -> None:
    wins = modes.claim_race(emulator.endpoint_url)
    assert wins == Counter(range(modes.ITEMS))


def test_concurrent_receives_hand_each_message_to_one_receiver(emulator: Emulator) -> None:
    received = modes.receive_race(emulator.endpoint_url)
    assert received == Counter(str(i) for i in range(modes.RECEIVED))


@pytest.fixture
def keyed_table(emulator: Emulator) -> tuple[Any, str]:
    """40 items in 4 partitions of the message table's layout; every third one is in the due index."""
    ddb = client(emulator.endpoint_url, "dynamodb")
    table = inprocess.create_table(ddb, "narrowed-queries", ("version",))
    for i in range(40):
        item = {"pk": {"S": f"p{i % 4}"}, "sk": {"S": f"s{i:02d}"}}
        if i % 3 == 0:
            item |= {"sweep_pk": {"S": f"b{i % 2}"}, "sweep_sk": {"S": f"{40 - i:02d}"}}
        ddb.put_item(TableName=table, Item=item)
    return ddb, table


def pages(ddb: Any, table: str, condition: str, values: dict[str, str], **extra: Any) -> list[str]:
    """Every sk a query returns, following LastEvaluatedKey with pages of 3."""
    query = {
        "TableName": table,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": {name: {"S": value} for name, value in values.items()},
        "Limit": 3,
        **extra,
    }
    found: list[str] = []
    while True:
        answer = ddb.query(**query)
        found += [item["sk"]["S"] for item in answer["Items"]]
        if "LastEvaluatedKey" not in answer:
            return found
        query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def test_a_table_query_reads_its_partition_in_key_order(keyed_table: tuple[Any, str]) -> None:
    found = pages(*keyed_table, "pk = :p AND sk > :s", {":p": "p1", ":s": "s10"})
    assert found == [f"s{i:02d}" for i in range(13, 40, 4)]


def test_an_index_query_reads_only_the_entries_with_its_key_in_index_order(keyed_table: tuple[Any, str]) -> None:
    found = pages(*keyed_table, "sweep_pk = :b", {":b": "b0"}, IndexName="due")
    assert found == [f"s{i:02d}" for i in sorted(range(0, 40, 6), key=lambda i: 40 - i)]


def test_a_segmented_scan_in_pages_reads_every_item_once(keyed_table: tuple[Any, str]) -> None:
    ddb, table = keyed_table
    found: list[str] = []
    for segment in range(3):
        scan: dict[str, Any] = {"TableName": table, "Segment": segment, "TotalSegments": 3, "Limit": 4}
        while True:
            answer = ddb.scan(**scan)
            found += [item["sk"]["S"] for item in answer["Items"]]
            if "LastEvaluatedKey" not in answer:
                break
            scan["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    assert sorted(found) == [f"s{i:02d}" for i in range(40)]
