"""Row numbers and ids of a directory of input files: from file name and position, whatever the splits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline import io

pytestmark = pytest.mark.spark


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three JSON Lines files of 40 rows, written out of name order."""
    folder = tmp_path / "batch"
    folder.mkdir()
    for name in ("c.jsonl", "a.jsonl", "b.jsonl"):
        rows = [json.dumps({"queue": "q", "body": f"{name}-{i}"}) for i in range(1, 41)]
        (folder / name).write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture
def small_splits(spark: SparkSession) -> Iterator[None]:
    """Files cut into ~256-byte splits, packed into partitions by size: another cluster's layout."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", "256")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    yield
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    spark.conf.unset("spark.sql.files.openCostInBytes")


def numbered(spark: SparkSession, folder: Path) -> dict[str, tuple[int, str]]:
    read = io.read_input(spark, str(folder), "jsonl")
    try:
        return {json.loads(r.value)["body"]: (r.row, r.key) for r in read.rows.collect()}
    finally:
        read.release()


def test_rows_are_numbered_over_the_files_in_name_order(spark: SparkSession, folder: Path) -> None:
    rows = numbered(spark, folder)

    assert rows["a.jsonl-1"] == (1, "batch/a.jsonl:1")
    assert rows["b.jsonl-7"] == (47, "batch/b.jsonl:7")
    assert rows["c.jsonl-40"] == (120, "batch/c.jsonl:40")


def test_numbers_do_not_depend_on_the_splits(spark: SparkSession, folder: Path, small_splits: None) -> None:
    assert spark.read.text(str(folder)).rdd.getNumPartitions() > 3
    split = numbered(spark, folder)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(128 * 1024 * 1024))

    whole = numbered(spark, folder)

    assert split == whole and len(whole) == 120


def test_one_file_keeps_its_ids_from_earlier_releases(spark: SparkSession, folder: Path) -> None:
    read = io.read_input(spark, str(folder / "b.jsonl"), "jsonl")

    assert [(r.row, r.key) for r in read.rows.limit(2).collect()] == [(1, "b.jsonl:1"), (2, "b.jsonl:2")]


@pytest.mark.parametrize(
    ("path", "single"),
    [("s3://b/in/messages.csv", True), ("s3://b/in/", False), ("s3://b/in/batch", False), ("s3://b/in/*.csv", False)],
)
def test_an_s3_file_is_told_from_a_prefix(path: str, single: bool) -> None:
    assert io._single_file(path) is single
