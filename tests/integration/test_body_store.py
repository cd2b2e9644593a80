"""The S3 body store under moto: put, get, delete, one object per body version, errors as BodyStoreError."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hourglass.adapters.body_store import BodyStore
from hourglass.core import formats
from hourglass.core.keys import body_object_key
from hourglass.errors import BodyStoreError, NewerFormatError, StoreError
from moto import mock_aws

BODY = {"order": 42, "lines": ["a" * 100] * 10, "note": "héllo"}


@pytest.fixture
def s3() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bodies")
        yield client


def test_a_body_put_is_read_back(s3: object) -> None:
    store = BodyStore("bodies", client=s3)
    store.put("orders", "ab12", 1, BODY)
    text = store.get_text("orders", "ab12", 1)
    assert text is not None and json.loads(text) == BODY and "héllo" in text


def test_a_missing_body_reads_as_none(s3: object) -> None:
    assert BodyStore("bodies", client=s3).get_text("orders", "ab12", 1) is None


def test_a_deleted_body_is_gone(s3: object) -> None:
    store = BodyStore("bodies", client=s3)
    store.put("orders", "ab12", 1, BODY)
    store.delete("orders", "ab12", 1)
    assert store.get_text("orders", "ab12", 1) is None


def test_deleting_a_body_twice_is_not_an_error(s3: object) -> None:
    store = BodyStore("bodies", client=s3)
    store.delete("orders", "ab12", 1)
    store.delete("orders", "ab12", 1)
    assert store.get_text("orders", "ab12", 1) is None


def test_a_new_version_leaves_the_old_one_readable(s3: object) -> None:
    store = BodyStore("bodies", client=s3)
    store.put("orders", "ab12", 1, "old")
    store.put("orders", "ab12", 2, "new")
    assert (store.get_text("orders", "ab12", 1), store.get_text("orders", "ab12", 2)) == ('"old"', '"new"')


def test_the_object_key_is_derived_from_queue_id_and_version(s3: object) -> None:
    key = BodyStore("bodies", client=s3).put("orders", "ab12", 3, BODY)
    assert key == body_object_key("orders", "ab12", 3) == "ab/orders/ab12/3"


def test_a_missing_bucket_is_a_store_error(s3: object) -> None:
    store = BodyStore("no-such-bucket", client=s3)
    with pytest.raises(BodyStoreError) as raised:
        store.put("orders", "ab12", 1, BODY)
    assert isinstance(raised.value, StoreError)


def test_reading_from_a_missing_bucket_is_a_store_error(s3: object) -> None:
    with pytest.raises(BodyStoreError):
        BodyStore("no-such-bucket", client=s3).get_text("orders", "ab12", 1)


def test_a_body_names_its_format_in_its_metadata(s3: Any) -> None:
    BodyStore("bodies", client=s3).put("orders", "ab12", 1, BODY)
    got = s3.head_object(Bucket="bodies", Key=body_object_key("orders", "ab12", 1))
    assert got["Metadata"] == {"fv": str(formats.FORMATS["body"])}


def test_a_body_as_1_2_0_wrote_it_reads_and_one_of_a_newer_format_is_refused(s3: Any) -> None:
    key, store = body_object_key("orders", "ab12", 1), BodyStore("bodies", client=s3)
    s3.put_object(Bucket="bodies", Key=key, Body=b'{"n": 1}', ContentType="application/json")
    assert store.get_text("orders", "ab12", 1) == '{"n": 1}'
    s3.put_object(Bucket="bodies", Key=key, Body=b"{}", Metadata={"fv": str(formats.FORMATS["body"] + 1)})
    with pytest.raises(NewerFormatError):
        store.get_text("orders", "ab12", 1)
