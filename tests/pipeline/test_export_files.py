"""Reading export data from S3 without manifests: data files found under the prefix, lines streamed and decoded."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hourglass.adapters.items import message_key
from moto import mock_aws

from pipeline import exports
from pipeline.deployment import Deployment

EXPORT = "s3://exports/AWSDynamoDB/0123-abc"
ITEMS = [{**message_key("q", f"m{i}"), "id": {"S": f"m{i}"}} for i in range(3)]


@pytest.fixture
def bucket() -> Iterator[Any]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="exports")
        prefix = "AWSDynamoDB/0123-abc"
        lines = "".join(json.dumps({"Item": item}) + "\n" for item in ITEMS)
        s3.put_object(Bucket="exports", Key=f"{prefix}/data/a.json.gz", Body=gzip.compress(lines[:-1].encode()))
        s3.put_object(Bucket="exports", Key=f"{prefix}/data/b.json", Body=b"\n")
        s3.put_object(Bucket="exports", Key=f"{prefix}/manifest-files.json", Body=b"{}")
        s3.put_object(Bucket="exports", Key=f"{prefix}/_SUCCESS", Body=b"")
        yield s3


def test_only_data_files_are_read(bucket: Any) -> None:
    files = list(exports.plan(EXPORT, Deployment(table="")).bare_files)

    assert files == [f"{EXPORT}/data/a.json.gz", f"{EXPORT}/data/b.json"]


def test_gzipped_lines_decode_to_the_items(bucket: Any) -> None:
    located = Deployment(table="")

    files = exports.plan(EXPORT, located).bare_files
    items = [item for url in files for _, (_, item) in exports.changes(exports.lines(url, located), 0)]

    assert items == ITEMS


def test_an_empty_prefix_is_an_input_error(bucket: Any) -> None:
    with pytest.raises(exports.ExportError, match="no export data files"):
        exports.plan("s3://exports/nothing-here", Deployment(table=""))
