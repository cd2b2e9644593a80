"""Files in and out: message inputs with row numbers, DynamoDB exports, report tables and documents.

Local paths and ``s3://`` URLs both work; S3 goes through boto3 so no Hadoop S3 connector is needed.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline import cells, exports, records, transforms
from pipeline.deployment import Deployment

FORMATS = ("csv", "jsonl", "parquet")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet"}


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
        found = {input_format(str(f)) for f in Path(path).rglob("*") if f.is_file() and _SUFFIXES.get(_suffix(f.name))}
        return found.pop() if len(found) == 1 else "parquet"
    raise InputError(f"cannot tell the format of {path}; pass --format ({', '.join(FORMATS)})")


def _suffix(name: str) -> str:
    return Path(name.lower().removesuffix(".gz")).suffix


@dataclass(frozen=True)
class MessageInput:
    """An input's rows, numbered: `row`, `key` + the cell columns, or + `value` (one JSON document).

    `row` is the 1-based record number over the input's files in name order; `key` names the row in
    ids ("<source>:<row>" for one file, "<source>/<file>:<record in that file>" for a directory), so
    neither depends on how Spark split the files or on the cluster's size. Cached: read once.
    """

    rows: DataFrame
    total: int
    lines: bool
    files: int = 1
    cached: DataFrame | None = None

    def queue_counts(self) -> dict[str, int]:
        """The distinct queue names the rows give and how many rows give each, read without touching Python."""
        counted = transforms.queue_counts_from_lines if self.lines else transforms.queue_counts_from_cells
        return {row.queue: row["count"] for row in counted(self.rows).collect()}

    def documents(self, partitions: int) -> DataFrame:
        """`row`, `key`, `doc` spread over `partitions` (before any per-row Python runs)."""
        spread = self.rows.repartition(partitions)
        return transforms.documents_from_lines(spread) if self.lines else transforms.documents_from_cells(spread)

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def read_input(spark: SparkSession, path: str, fmt: str, source: str | None = None) -> MessageInput:
    """The rows of a CSV, JSON Lines or Parquet file or directory of files, numbered and cached."""
    source = source or PurePosixPath(path.rstrip("/")).name
    if fmt == "jsonl":
        lines = with_row_numbers(spark.read.text(path), source, single=_single_file(path))
        return MessageInput(lines.rows, lines.total, lines=True, files=lines.files, cached=lines.cached)
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
    chosen = table.select(*(c for c in cells.COLUMNS if c in table.columns))
    numbered = with_row_numbers(chosen, source, single=_single_file(path))
    return MessageInput(numbered.rows, numbered.total, lines=False, files=numbered.files, cached=numbered.cached)


def _single_file(path: str) -> bool:
    """A file (not a directory, prefix or glob): its rows keep the ids of earlier releases, source:row."""
    if path.startswith("s3://"):
        name = path.rsplit("/", 1)[-1]
        return bool(name) and _suffix(name) in _SUFFIXES and not any(c in name for c in "*?[{")
    return Path(path).is_file()


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


@dataclass(frozen=True)
class Numbered:
    rows: DataFrame
    total: int
    files: int
    cached: DataFrame


def with_row_numbers(table: DataFrame, source: str = "input", *, single: bool = True) -> Numbered:
    """Adds `row` (1-based over the files in name order) and `key` (see MessageInput).

    Tagged as read (file, split start, partition, position), cached, and counted once per split:
    a split's rows are contiguous in its partition, so file order + split start + position give
    each row's place in its file whatever the split size or partition count.
    """
    tagged = table.select(
        "*",
        F.input_file_name().alias("_file"),
        F.input_file_block_start().alias("_block"),
        F.spark_partition_id().alias("_part"),
        F.monotonically_increasing_id().alias("_mid"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    stats = tagged.groupBy("_file", "_block", "_part").agg(F.count("*").alias("n"), F.min("_mid").alias("_first"))
    groups = sorted((r["_file"], r["_block"], r["_part"], r["n"], r["_first"]) for r in stats.collect())
    names = _relative_names(sorted({g[0] for g in groups}))
    single = single or len(names) <= 1
    spans = []
    total = 0
    in_file: dict[str, int] = {}
    for file, block, part, count, first in groups:
        before = in_file.get(file, 0)
        prefix = f"{source}:" if single else f"{source}/{names[file]}:"
        spans.append((file, block, part, first, total, total if single else before, prefix))
        in_file[file] = before + count
        total += count
    if not spans:
        empty = table.select(F.lit(None).cast("long").alias("row"), F.lit(None).cast("string").alias("key"), "*")
        return Numbered(empty, 0, 0, tagged)
    schema = "_file STRING, _block LONG, _part INT, _first LONG, _offset LONG, _koffset LONG, _prefix STRING"
    located = table.sparkSession.createDataFrame(spans, schema)
    position = F.col("_mid") - F.col("_first")
    numbered = tagged.join(F.broadcast(located), ["_file", "_block", "_part"]).select(
        (F.col("_offset") + position + 1).alias("row"),
        F.concat(F.col("_prefix"), (F.col("_koffset") + position + 1).cast("string")).alias("key"),
        *(F.col(c) for c in table.columns),
    )
    return Numbered(numbered, total, len(names), tagged)


def _relative_names(files: list[str]) -> dict[str, str]:
    """Each file's path below the directory all of them share."""
    if len(files) <= 1:
        return {f: f.rsplit("/", 1)[-1] for f in files}
    common = files[0].rsplit("/", 1)[0]
    while not all(f.startswith(common + "/") for f in files):
        common = common.rsplit("/", 1)[0]
    return {f: f[len(common) + 1 :] for f in files}


# ---------------------------------------------------------------------------------- exports


def read_export(
    spark: SparkSession, path: str, deployment: Deployment | None = None, newer: Any = None
) -> tuple[DataFrame, str]:
    """Message records from a DynamoDB export (pipeline.exports: manifests, incremental exports), and
    what was read."""
    try:
        chosen = exports.plan(path, deployment)
    except exports.ExportError as exc:
        raise InputError(str(exc)) from exc
    if chosen.exports:
        sources = [(f, e.as_of_us) for e in chosen.exports for f in e.files]
    else:
        sources = [(f, 0) for f in chosen.bare_files]
    sc = spark.sparkContext
    located = sc.parallelize(sources, max(1, min(len(sources), 4 * sc.defaultParallelism)))
    changed = located.flatMap(
        lambda source: exports.changes(exports.lines(source[0], deployment), source[1], source[0])
    )
    if len(chosen.exports) > 1:
        # Incremental exports over the full one: per key the latest write, deletes dropped.
        items = changed.reduceByKey(exports.latest).values().filter(lambda write: write[1] is not None)
    else:
        items = changed.values()
    messages = items.map(lambda write: write[1]).mapPartitions(lambda part: records.records(part, newer))
    return spark.createDataFrame(messages, records.SCHEMA), chosen.describe()


def _split_s3(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def _s3_client(deployment: Deployment | None) -> Any:
    return (deployment or Deployment(table="")).client("s3")


# ---------------------------------------------------------------------------------- outputs


def write_csv(table: DataFrame, path: str) -> None:
    """A CSV with a header, written by every task in parallel (no single-task coalesce).

    Locally the part files are joined, in order, into one file at `path`; on S3 `path` is a prefix
    of part files, each with its header.
    """
    if path.startswith("s3://"):
        table.write.mode("overwrite").options(header=True, escape='"').csv(path)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".spark-") as scratch:
        table.write.mode("overwrite").options(header=False, escape='"').csv(f"{scratch}/out")
        joined = Path(scratch, "joined.csv")
        with joined.open("w", newline="") as out:
            csv.writer(out).writerow(table.columns)
            for part in sorted(Path(scratch, "out").glob("part-*.csv")):
                with part.open(newline="") as data:
                    shutil.copyfileobj(data, out)
        shutil.move(joined, target)


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
