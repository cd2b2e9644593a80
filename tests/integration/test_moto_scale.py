"""The embedded moto's size-independent index queries, Scan pages and transactions answer as before."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devstack import moto_atomic, moto_speed

TABLE = "scale"
INDEX = "due"


@pytest.fixture
def ddb() -> Iterator[Any]:
    moto_speed.install()
    moto_atomic.install()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "gpk", "gsk")
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": INDEX,
                    "KeySchema": [
                        {"AttributeName": "gpk", "KeyType": "HASH"},
                        {"AttributeName": "gsk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
        )
        yield client


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _indexed(client: Any, gpk: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    pages = client.get_paginator("query").paginate(
        TableName=TABLE,
        IndexName=INDEX,
        KeyConditionExpression="gpk = :p",
        ExpressionAttributeValues={":p": {"S": gpk}},
        PaginationConfig={"PageSize": 3},
    )
    for page in pages:
        found += [(item["pk"]["S"], item["sk"]["S"]) for item in page["Items"]]
    return sorted(found)


def _scanned(client: Any, segments: int) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for segment in range(segments):
        pages = client.get_paginator("scan").paginate(
            TableName=TABLE, Segment=segment, TotalSegments=segments, PaginationConfig={"PageSize": 4}
        )
        for page in pages:
            found += [(item["pk"]["S"], item["sk"]["S"]) for item in page["Items"]]
    return found


def test_index_queries_follow_puts_updates_and_deletes(ddb: Any) -> None:
    rng = random.Random(7)
    model: dict[tuple[str, str], str | None] = {}  # key -> index partition, None when not indexed
    _indexed(ddb, "b0")  # the index map exists from here on: every later write must keep it current
    for _ in range(400):
        key = (f"q{rng.randrange(3)}", f"m{rng.randrange(12)}")
        gpk = f"b{rng.randrange(3)}"
        action = rng.choice(["put", "put_plain", "set", "remove", "delete"])
        if action == "put":
            ddb.put_item(TableName=TABLE, Item={**_key(*key), "gpk": {"S": gpk}, "gsk": {"S": key[1]}})
            model[key] = gpk
        elif action == "put_plain":
            ddb.put_item(TableName=TABLE, Item=_key(*key))
            model[key] = None
        elif action == "set":
            ddb.update_item(
                TableName=TABLE,
                Key=_key(*key),
                UpdateExpression="SET gpk = :p, gsk = :s",
                ExpressionAttributeValues={":p": {"S": gpk}, ":s": {"S": key[1]}},
            )
            model[key] = gpk
        elif action == "remove" and key in model:
            ddb.update_item(TableName=TABLE, Key=_key(*key), UpdateExpression="REMOVE gpk, gsk")
            model[key] = None
        elif action == "delete":
            ddb.delete_item(TableName=TABLE, Key=_key(*key))
            model.pop(key, None)
        partition = rng.choice(["b0", "b1", "b2"])
        assert _indexed(ddb, partition) == sorted(k for k, p in model.items() if p == partition)


def test_segmented_scans_return_every_item_once_in_key_order(ddb: Any) -> None:
    keys = [(f"q{i % 7}", f"m{i:03d}") for i in range(60)]
    for pk, sk in keys:
        ddb.put_item(TableName=TABLE, Item=_key(pk, sk))
    found = _scanned(ddb, 3)
    assert sorted(found) == sorted(keys) and len(found) == len(keys)


def test_a_scan_sees_writes_made_between_its_pages(ddb: Any) -> None:
    for i in range(10):
        ddb.put_item(TableName=TABLE, Item=_key("q", f"m{i:02d}"))
    first = ddb.scan(TableName=TABLE, Limit=4)
    ddb.put_item(TableName=TABLE, Item=_key("q", "m99"))
    ddb.delete_item(TableName=TABLE, Key=_key("q", "m05"))
    rest = ddb.scan(TableName=TABLE, ExclusiveStartKey=first["LastEvaluatedKey"])
    seen = [item["sk"]["S"] for item in first["Items"] + rest["Items"]]
    assert seen == [f"m{i:02d}" for i in range(10) if i != 5] + ["m99"]


def test_a_cancelled_transaction_leaves_items_and_index_as_they_were(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={**_key("q", "kept"), "gpk": {"S": "b"}, "gsk": {"S": "1"}, "v": {"S": "old"}})
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("q", "new"), "gpk": {"S": "b"}, "gsk": {"S": "2"}}}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("q", "kept"),
                        "UpdateExpression": "SET v = :v REMOVE gpk",
                        "ExpressionAttributeValues": {":v": {"S": "new"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("q", "missing"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert "Item" not in ddb.get_item(TableName=TABLE, Key=_key("q", "new"))
    assert ddb.get_item(TableName=TABLE, Key=_key("q", "kept"))["Item"]["v"] == {"S": "old"}
    assert _indexed(ddb, "b") == [("q", "kept")]


def test_a_committed_transaction_is_indexed(ddb: Any) -> None:
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**_key("q", "a"), "gpk": {"S": "b"}, "gsk": {"S": "1"}}}},
            {"Put": {"TableName": TABLE, "Item": {**_key("q", "b"), "gpk": {"S": "b"}, "gsk": {"S": "2"}}}},
        ]
    )
    assert _indexed(ddb, "b") == [("q", "a"), ("q", "b")]


def test_a_restored_backup_still_holds_a_copy(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={**_key("q", "a"), "v": {"S": "before"}})
    arn = ddb.create_backup(TableName=TABLE, BackupName="before-change")["BackupDetails"]["BackupArn"]
    ddb.put_item(TableName=TABLE, Item={**_key("q", "a"), "v": {"S": "after"}})
    ddb.restore_table_from_backup(TargetTableName="restored", BackupArn=arn)
    restored = ddb.get_item(TableName="restored", Key=_key("q", "a"))["Item"]["v"]
    assert (restored, ddb.get_item(TableName=TABLE, Key=_key("q", "a"))["Item"]["v"]) == (
        {"S": "before"},
        {"S": "after"},
    )


CONDITIONS = [
    ("pk = :q", {}, lambda sk: True),
    ("pk = :q AND sk = :a", {":a": "m07"}, lambda sk: sk == "m07"),
    ("pk = :q AND sk < :a", {":a": "m07"}, lambda sk: sk < "m07"),
    ("pk = :q AND sk <= :a", {":a": "m07"}, lambda sk: sk <= "m07"),
    ("pk = :q AND sk > :a", {":a": "m07"}, lambda sk: sk > "m07"),
    ("pk = :q AND sk >= :a", {":a": "m07"}, lambda sk: sk >= "m07"),
    ("pk = :q AND sk BETWEEN :a AND :b", {":a": "m03", ":b": "m1"}, lambda sk: "m03" <= sk <= "m1"),
    ("pk = :q AND begins_with(sk, :a)", {":a": "m1"}, lambda sk: sk.startswith("m1")),
]


def _queried(client: Any, condition: str, values: dict[str, str], forward: bool, page: int) -> list[str]:
    pages = client.get_paginator("query").paginate(
        TableName=TABLE,
        KeyConditionExpression=condition,
        ExpressionAttributeValues={":q": {"S": "q"}, **{k: {"S": v} for k, v in values.items()}},
        ScanIndexForward=forward,
        PaginationConfig={"PageSize": page},
    )
    return [item["sk"]["S"] for got in pages for item in got["Items"]]


@pytest.mark.parametrize(("condition", "values", "selects"), CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_table_queries_page_through_what_their_condition_selects(
    ddb: Any, condition: str, values: dict[str, str], selects: Any
) -> None:
    rng = random.Random(condition)
    stored: set[str] = set()
    for delete_share in (0.0, 0.0, 0.4, 0.0):
        for _ in range(15):  # writes between the rounds: the partition's cached order must follow them
            sk = f"m{rng.randrange(25):02d}"
            if rng.random() < delete_share:
                ddb.delete_item(TableName=TABLE, Key=_key("q", sk))
                stored.discard(sk)
            else:
                ddb.put_item(TableName=TABLE, Item=_key("q", sk))
                stored.add(sk)
        ddb.put_item(TableName=TABLE, Item=_key("other", "m07"))
        expected = sorted(sk for sk in stored if selects(sk))
        for forward, page in ((True, 3), (False, 4), (True, 100)):
            got = _queried(ddb, condition, values, forward, page)
            assert got == (expected if forward else expected[::-1]), (forward, page)


def test_an_item_over_the_size_limit_is_still_refused_and_one_under_it_stored(ddb: Any) -> None:
    big = {**_key("q", "big"), **{f"a{i}": {"S": "x" * 20_000} for i in range(21)}}  # ~420 KB
    fits = {**_key("q", "fits"), **{f"a{i}": {"S": "x" * 20_000} for i in range(19)}}  # ~380 KB

    with pytest.raises(ClientError) as raised:
        ddb.put_item(TableName=TABLE, Item=big)
    ddb.put_item(TableName=TABLE, Item=fits)

    assert "Item size has exceeded" in raised.value.response["Error"]["Message"]
    assert "Item" not in ddb.get_item(TableName=TABLE, Key=_key("q", "big"))
    assert len(ddb.get_item(TableName=TABLE, Key=_key("q", "fits"))["Item"]) == 21


def test_items_built_for_writes_and_answers_are_not_kept_once_dropped(ddb: Any) -> None:
    tracked = len(moto_speed.Item.instances_tracked)  # type: ignore[attr-defined]
    for i in range(20):
        ddb.put_item(TableName=TABLE, Item=_key("q", f"m{i:02d}"))
    ddb.query(TableName=TABLE, KeyConditionExpression="pk = :q", ExpressionAttributeValues={":q": {"S": "q"}})
    ddb.scan(TableName=TABLE)

    assert len(moto_speed.Item.instances_tracked) == tracked  # type: ignore[attr-defined]
