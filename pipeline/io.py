"""Files in and out: message inputs with row numbers, DynamoDB exports, report tables and documents.

Local paths and ``s3://`` URLs both work; S3 goes through boto3 so no Hadoop S3 connector is needed.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline import cells, records, transforms
from pipeline.deployment import Deployment

FORMATS = ("csv", "jsonl", "parquet")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
# monotonically_increasing_id() keeps the partition index above bit 33 and the position below.
_POSITION_BITS = 33


class InputError(ValueError):
    """The input cannot be read as messages (unknown format, missing columns)."""


def input_format(path: str, given: str | None = None) -> str:
    if given:
        return given
    name = path.rstrip("/").lower().removesuffix(".gz")
    for suffix, fmt in _SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    if Path(path).is_dir():
        return "parquet"
    raise InputError(f"cannot tell the format of {path}; pass --format ({', '.join(FORMATS)})")


@dataclass(frozen=True)
class MessageInput:
    """An input file's rows, numbered: `row` + the cell columns, or `row` + `value` (one JSON document)."""

    rows: DataFrame
    total: int
    lines: bool

    def queue_names(self) -> list[str]:
        """The distinct queue names the rows give, read without touching Python."""
        named = transforms.queue_names_from_lines if self.lines else transforms.queue_names_from_cells
        return [row.queue for row in named(self.rows).collect()]

    def documents(self, partitions: int) -> DataFrame:
        """`row`, `doc` spread over `partitions` (before any per-row Python runs)."""
        spread = self.rows.repartition(partitions)
        return transforms.documents_from_lines(spread) if self.lines else transforms.documents_from_cells(spread)


def read_input(spark: SparkSession, path: str, fmt: str) -> MessageInput:
    """The rows of a CSV, JSON Lines or Parquet input; `row` is the 1-based record number."""
    if fmt == "jsonl":
        lines, total = with_row_numbers(spark.read.text(path))
        return MessageInput(lines, total, lines=True)
    if fmt == "csv":
        # multiLine: a quoted cell may hold a line break. Such a file is read by one task; the
        # rows are spread over all cores before the per-row work.
        table = spark.read.options(header=True, multiLine=True, escape='"').csv(path)
    elif fmt == "parquet":
        table = _as_text(spark.read.parquet(path))
    else:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    missing = [name for name in cells.REQUIRED if name not in table.columns]
    if missing:
        raise InputError(f"{path} has no column {', '.join(missing)} (columns: {', '.join(table.columns)})")
    numbered, total = with_row_numbers(table.select(*(c for c in cells.COLUMNS if c in table.columns)))
    return MessageInput(numbered, total, lines=False)


def _as_text(table: DataFrame) -> DataFrame:
    """Parquet cells as the text a CSV would hold: nested values as JSON, times as RFC 3339."""
    columns = []
    for field in table.schema.fields:
        column = F.col(field.name)
        if isinstance(field.dataType, (T.StructType, T.MapType, T.ArrayType)):
            column = F.to_json(column)
        elif isinstance(field.dataType, (T.TimestampType, T.TimestampNTZType)):
            column = F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
        columns.append(column.cast("string").alias(field.name))
    return table.select(*columns)


def with_row_numbers(table: DataFrame) -> tuple[DataFrame, int]:
    """Adds `row`, the 1-based position in the input, like RDD.zipWithIndex but without Python.

    One counting pass gives each partition's offset; file partitions keep the file's order.
    """
    tagged = table.withColumn("_part", F.spark_partition_id()).withColumn("_mid", F.monotonically_increasing_id())
    offsets: dict[int, int] = {}
    total = 0
    for part, count in sorted(tagged.groupBy("_part").count().collect()):
        offsets[part] = total
        total += count
    if not offsets:
        return table.withColumn("row", F.lit(None).cast("long")).select("row", *table.columns), 0
    offset = F.create_map(*(F.lit(x) for pair in offsets.items() for x in pair))[F.col("_part")]
    position = F.col("_mid") - F.shiftleft(F.col("_part").cast("long"), _POSITION_BITS)
    numbered = tagged.withColumn("row", offset + position + 1)
    return numbered.select("row", *table.columns), total


# ---------------------------------------------------------------------------------- exports


def read_export(spark: SparkSession, path: str, deployment: Deployment | None = None) -> DataFrame:
    """Message records from a DynamoDB export (DynamoDB JSON lines, gzip or not)."""
    if path.startswith("s3://"):
        keys = s3_export_files(path, deployment)
        located = spark.sparkContext.parallelize(keys, max(1, len(keys)))
        items = located.flatMap(lambda key: records.export_items(s3_lines(deployment, key)))
    else:
        files = [str(p) for p in _local_export_files(Path(path))]
        if not files:
            raise InputError(f"no export data files (*.json, *.json.gz) under {path}")
        items = spark.read.text(files).rdd.mapPartitions(lambda rows: records.export_items(r.value for r in rows))
    return spark.createDataFrame(items.mapPartitions(records.records), records.SCHEMA)


def _export_data_file(name: str) -> bool:
    return name.endswith((".json", ".json.gz")) and not name.startswith(("manifest", "_"))


def _local_export_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and _export_data_file(p.name))


def _split_s3(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def _s3_client(deployment: Deployment | None) -> Any:
    return (deployment or Deployment(table="")).client("s3")


def s3_export_files(url: str, deployment: Deployment | None) -> list[str]:
    """The export's data files under an ``s3://bucket/prefix`` (manifests left out)."""
    bucket, prefix = _split_s3(url)
    pages = _s3_client(deployment).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys = [o["Key"] for page in pages for o in page.get("Contents", []) if _export_data_file(o["Key"].rsplit("/")[-1])]
    if not keys:
        raise InputError(f"no export data files (*.json, *.json.gz) under {url}")
    return [f"s3://{bucket}/{key}" for key in keys]


def s3_lines(deployment: Deployment | None, url: str) -> Iterator[bytes]:
    """The lines of one S3 object, gunzipped when its name ends in .gz, streamed."""
    bucket, key = _split_s3(url)
    body = _s3_client(deployment).get_object(Bucket=bucket, Key=key)["Body"]
    if key.endswith(".gz"):
        yield from gzip.GzipFile(fileobj=body)
    else:
        yield from body.iter_lines()


# ---------------------------------------------------------------------------------- outputs


def write_csv(table: DataFrame, path: str) -> None:
    """One CSV file with a header (on S3: one part file under the `path` prefix)."""
    writer = table.coalesce(1).write.mode("overwrite").options(header=True, escape='"')
    if path.startswith("s3://"):
        writer.csv(path)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".spark-") as scratch:
        writer.csv(f"{scratch}/out")
        (part,) = Path(scratch, "out").glob("part-*.csv")
        shutil.move(part, target)


def write_bytes(path: str, data: bytes, deployment: Deployment | None = None) -> None:
    if path.startswith("s3://"):
        bucket, key = _split_s3(path)
        _s3_client(deployment).put_object(Bucket=bucket, Key=key, Body=data)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def write_json(path: str, doc: Any, deployment: Deployment | None = None) -> None:
    write_bytes(path, (json.dumps(doc, indent=2, default=str) + "\n").encode(), deployment)


class Output:
    """A directory of outputs: local, or an ``s3://bucket/prefix``."""

    def __init__(self, location: str, deployment: Deployment | None = None) -> None:
        self.location = location.rstrip("/")
        self.deployment = deployment

    def path(self, relative: str) -> str:
        return f"{self.location}/{relative}"

    def write_table(self, table: DataFrame, name: str) -> None:
        """`parquet/<name>/` and `csv/<name>.csv`."""
        table.write.mode("overwrite").parquet(self.path(f"parquet/{name}"))
        write_csv(table, self.path(f"csv/{name}.csv"))

    def write_bytes(self, relative: str, data: bytes) -> None:
        write_bytes(self.path(relative), data, self.deployment)

    def write_json(self, relative: str, doc: Any) -> None:
        write_json(self.path(relative), doc, self.deployment)
