"""DynamoDB exports by their manifests: finished or not, one full export, incremental exports applied over it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hourglass.adapters.items import message_key
from pyspark.sql import SparkSession

from pipeline import exports, io

FULL_AT = "2026-11-21T10:00:00Z"
FULL_US = 1_795_255_200_000_000  # FULL_AT in microseconds


def item(name: str, status: str = "pending") -> dict[str, Any]:
    return {
        **message_key("q", name),
        "id": {"S": name},
        "queue": {"S": "q"},
        "body": {"S": "1"},
        "status": {"S": status},
        "created_at": {"N": "1"},
        "due_at": {"N": "2"},
        "version": {"N": "1"},
    }


def export(root: Path, kind: str, lines: list[dict[str, Any]], **summary: Any) -> Path:
    """An export directory as DynamoDB writes it: _started, data/, manifest-files.json, manifest-summary.json."""
    data = root / "data"
    data.mkdir(parents=True)
    (root / "_started").write_bytes(b"")
    (data / "part-0.json.gz").write_bytes(gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode()))
    key = f"exports/AWSDynamoDB/{root.name}/data/part-0.json.gz"
    (root / "manifest-files.json").write_text(json.dumps({"itemCount": len(lines), "dataFileS3Key": key}) + "\n")
    times = {"exportTime": FULL_AT} if kind == exports.FULL else {}
    (root / "manifest-summary.json").write_text(
        json.dumps({"exportType": kind, "outputFormat": "DYNAMODB_JSON", **times, **summary})
    )
    return root


def change(name: str, micros: int, new: dict[str, Any] | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"Metadata": {"WriteTimestampMicros": {"N": str(micros)}}, "Keys": message_key("q", name)}
    if new is not None:
        doc["NewImage"] = new
    return doc


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A full export of a, b, c, and an incremental one: b delivered, c deleted, d added."""
    base = tmp_path / "AWSDynamoDB"
    export(base / "0001-full", exports.FULL, [{"Item": item(n)} for n in "abc"])
    export(
        base / "0002-incr",
        exports.INCREMENTAL,
        [
            change("b", FULL_US + 5, item("b", "delivered")),
            change("c", FULL_US + 7, None),
            change("d", FULL_US + 9, item("d")),
        ],
        exportFromTime=FULL_AT,
        exportToTime="2026-11-21T11:00:00Z",
    )
    return tmp_path


def test_an_unfinished_export_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "AWSDynamoDB" / "0003-running"
    root.mkdir(parents=True)
    (root / "_started").write_bytes(b"")

    with pytest.raises(exports.ExportError, match="has not finished"):
        exports.plan(str(tmp_path))


def test_two_full_exports_under_one_prefix_are_refused(tmp_path: Path) -> None:
    export(tmp_path / "AWSDynamoDB" / "0001-a", exports.FULL, [{"Item": item("a")}])
    export(tmp_path / "AWSDynamoDB" / "0002-b", exports.FULL, [{"Item": item("a")}])

    with pytest.raises(exports.ExportError, match="2 full exports"):
        exports.plan(str(tmp_path))


def test_an_incremental_export_alone_is_refused(prefix: Path) -> None:
    with pytest.raises(exports.ExportError, match="0 full exports"):
        exports.plan(str(prefix / "AWSDynamoDB" / "0002-incr"))


def test_the_manifest_lists_the_data_files_in_apply_order(prefix: Path) -> None:
    chosen = exports.plan(str(prefix))

    assert [(e.kind, e.as_of_us, [Path(f).name for f in e.files]) for e in chosen.exports] == [
        (exports.FULL, FULL_US, ["part-0.json.gz"]),
        (exports.INCREMENTAL, FULL_US + 3600 * 1_000_000, ["part-0.json.gz"]),
    ]


def test_the_latest_write_wins_and_a_delete_beats_an_equal_time_write() -> None:
    write, delete = (5, item("a")), (5, None)

    assert exports.latest((4, item("a")), write) is write
    assert exports.latest(write, delete) is delete and exports.latest(delete, write) is delete


def test_lines_that_are_not_export_data_name_the_file() -> None:
    with pytest.raises(exports.ExportError, match=r"x\.json line 2"):
        list(exports.changes(["", '{"Other": 1}'], 0, "x.json"))


@pytest.mark.spark
def test_incremental_exports_apply_over_the_full_one(spark: SparkSession, prefix: Path) -> None:
    messages, source = io.read_export(spark, str(prefix))

    assert sorted((r.id, r.status) for r in messages.collect()) == [
        ("a", "pending"),
        ("b", "delivered"),
        ("d", "pending"),
    ]
    assert "+ 1 incremental" in source


def test_a_summary_without_its_file_manifest_is_refused(tmp_path: Path) -> None:
    root = export(tmp_path / "AWSDynamoDB" / "0001-a", exports.FULL, [{"Item": item("a")}])
    (root / "manifest-files.json").unlink()

    with pytest.raises(exports.ExportError, match=r"manifest-files\.json cannot be read"):
        exports.plan(str(tmp_path))
