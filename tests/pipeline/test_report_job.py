"""The delivery report end to end: from the deployed table (parallel Scan) and from a DynamoDB export."""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hourglass.adapters.items import message_to_item, queue_to_item
from hourglass.core import validation
from hourglass.core.model import Message, Queue, Status
from hourglass.core.timestamps import format_rfc3339
from pyspark.sql import SparkSession

from pipeline import report_job
from tests.pipeline.conftest import Stack

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")]

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
TABLES = (
    "status_by_queue",
    "status_by_hour",
    "lateness_by_queue",
    "lateness_by_hour",
    "attempts",
    "failures",
    "stuck",
    "schedules",
    "lateness_split",
)
# The from-table report splits lateness here: rpt-s's occurrences 1 and 2 (0.8 s and 5 s late) are due after it.
DUE_AFTER = NOW - timedelta(minutes=9)


def message(queue: str, name: str, status: Status, due: datetime, **fields: Any) -> Message:
    return Message(id=name, queue=queue, body={"n": name}, status=status, created_at=due, due_at=due, **fields)


def messages() -> list[Message]:
    """rpt-a: ten delivered 0.1 .. 1.0 s late and one waiting; rpt-b: three failed and two stuck."""
    base = NOW - timedelta(hours=1)
    delivered = [
        message("rpt-a", f"a{i}", Status.DELIVERED, base, attempts=1, delivered_at=base + timedelta(seconds=i / 10))
        for i in range(1, 11)
    ]
    return [
        *delivered,
        message("rpt-a", "a-later", Status.PENDING, NOW + timedelta(hours=1)),
        *(
            message("rpt-b", f"b{i}", Status.FAILED, base, attempts=5, last_error=error)
            for i, error in enumerate(["HTTP 500", "HTTP 500", "timeout"])
        ),
        message("rpt-b", "b-stuck", Status.PENDING, NOW - timedelta(minutes=30)),
        message("rpt-b", "b-stuck-2", Status.DELIVERING, NOW - timedelta(minutes=11), attempts=1),
        message("rpt-b", "b-recent", Status.PENDING, NOW - timedelta(minutes=5)),
    ]


def occurrences() -> list[Message]:
    """rpt-s: schedule "tick" every minute, two on time, one 5 s late, one failed, one cancelled, one pending."""
    base = NOW - timedelta(minutes=10)

    def tick(k: int, status: Status, **fields: Any) -> Message:
        at = base + timedelta(minutes=k)
        created = at - timedelta(minutes=1)
        return replace(
            message("rpt-s", f"s{k}", status, at, schedule="tick", occurrence_at=at, **fields), created_at=created
        )

    return [
        tick(0, Status.DELIVERED, delivered_at=base + timedelta(seconds=0.3)),
        tick(1, Status.DELIVERED, delivered_at=base + timedelta(minutes=1, seconds=0.8)),
        tick(2, Status.DELIVERED, delivered_at=base + timedelta(minutes=2, seconds=5)),
        tick(3, Status.FAILED, attempts=5, last_error="HTTP 500"),
        tick(4, Status.CANCELLED),
        tick(5, Status.PENDING),
    ]


def table_rows(out: Path, name: str, queue: str) -> list[dict[str, str]]:
    with (out / "csv" / f"{name}.csv").open() as rows:
        return [row for row in csv.DictReader(rows) if row.get("queue") == queue]


def report(spark: SparkSession, stack: Stack, out: Path, *source: str) -> dict[str, Any]:
    args = report_job.parser().parse_args(
        [*source, "--out", str(out), "--now", format_rfc3339(NOW), "--endpoint-url", stack.endpoint]
    )
    return report_job.run(spark, args)


@pytest.fixture(scope="module")
def from_table(spark: SparkSession, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    stack.store().put_messages((m, None) for m in [*messages(), *occurrences()])
    out = tmp_path_factory.mktemp("report")
    report(spark, stack, out, "--due-after", format_rfc3339(DUE_AFTER))
    return out


def test_writes_every_table_as_parquet_and_csv(from_table: Path) -> None:
    for name in TABLES:
        assert (from_table / "csv" / f"{name}.csv").is_file()
        assert list((from_table / "parquet" / name).glob("*.parquet"))


def test_writes_the_charts_and_a_markdown_report_that_embeds_them(from_table: Path) -> None:
    document = (from_table / "report.md").read_text()

    for chart in ("charts/lateness.png", "charts/deliveries.png"):
        assert (from_table / chart).read_bytes().startswith(b"\x89PNG")
        assert f"]({chart})" in document
    assert "| rpt-a | 10 | 0.500 | 0.900 | 1.000 | 1.000 |" in document


def test_lateness_percentiles_of_a_queue(from_table: Path) -> None:
    (row,) = table_rows(from_table, "lateness_by_queue", "rpt-a")

    assert row == {"queue": "rpt-a", "delivered": "10", "p50_s": "0.5", "p90_s": "0.9", "p99_s": "1.0", "max_s": "1.0"}


def test_due_after_splits_the_lateness_at_its_time(from_table: Path) -> None:
    with (from_table / "csv" / "lateness_split.csv").open() as rows:
        split = {row.pop("due"): row for row in csv.DictReader(rows)}

    assert split["at or after"] == {"delivered": "2", "p50_s": "0.8", "p90_s": "5.0", "p99_s": "5.0", "max_s": "5.0"}
    assert split["before"]["delivered"] == "11"
    summary = json.loads((from_table / "summary.json").read_text())
    assert summary["lateness_split_s"]["at or after"]["max_s"] == 5.0


def test_due_after_without_an_offset_is_an_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        report_job.parser().parse_args(["--due-after", "2026-11-21T10:00:00"])

    assert "argument --due-after: '2026-11-21T10:00:00' is not an RFC 3339 date-time" in capsys.readouterr().err


def test_status_counts_of_a_queue(from_table: Path) -> None:
    (row,) = table_rows(from_table, "status_by_queue", "rpt-b")

    assert (row["failed"], row["pending"], row["delivering"], row["total"]) == ("3", "2", "1", "6")


def test_top_failure_reasons(from_table: Path) -> None:
    rows = table_rows(from_table, "failures", "rpt-b")

    assert [(r["last_error"], r["messages"], r["rank"]) for r in rows] == [
        ("HTTP 500", "2", "1"),
        ("timeout", "1", "2"),
    ]


def test_stuck_messages_are_listed(from_table: Path) -> None:
    assert [r["id"] for r in table_rows(from_table, "stuck", "rpt-b")] == ["b-stuck", "b-stuck-2"]


def test_schedule_figures(from_table: Path) -> None:
    (row,) = table_rows(from_table, "schedules", "rpt-s")

    figures = {k: row[k] for k in ("schedule", "occurrences", "on_time", "late", "failed", "cancelled", "waiting")}
    assert figures == {
        "schedule": "tick",
        "occurrences": "6",
        "on_time": "2",
        "late": "1",
        "failed": "1",
        "cancelled": "1",
        "waiting": "1",
    }
    assert "## Schedules" in (from_table / "report.md").read_text()


def write_export(root: Path, items: list[dict[str, Any]]) -> str:
    """A full DynamoDB export of `items` under `root`; its path."""
    data = root / "export" / "AWSDynamoDB" / "01234-abcd" / "data"
    data.mkdir(parents=True)
    (data.parent / "manifest-summary.json").write_text(
        '{"exportType": "FULL_EXPORT", "exportTime": "2026-11-21T10:00:00Z"}'
    )
    listed = {"dataFileS3Key": "exports/AWSDynamoDB/01234-abcd/data/part-0.json.gz", "itemCount": len(items)}
    (data.parent / "manifest-files.json").write_text(json.dumps(listed) + "\n")
    with gzip.open(data / "part-0.json.gz", "wt") as lines:
        lines.writelines(json.dumps({"Item": item}) + "\n" for item in items)
    return str(root / "export")


def test_export_gives_the_same_report(spark: SparkSession, stack: Stack, tmp_path: Path) -> None:
    settings = Queue("rpt-a", validation.queue_settings({}), NOW)
    export = write_export(tmp_path, [queue_to_item(settings), *(message_to_item(m) for m in messages())])

    summary = report(spark, stack, tmp_path / "out", "--export", export)

    assert summary["messages"] == len(messages())
    assert summary["lateness_s"] == {"delivered": 10, "p50_s": 0.5, "p90_s": 0.9, "p99_s": 1.0, "max_s": 1.0}
    assert summary["stuck"] == 2


def test_a_message_item_of_a_newer_release_is_left_out_and_said(
    spark: SparkSession, stack: Stack, tmp_path: Path
) -> None:
    newer = {**message_to_item(messages()[0]), "fv": {"N": "99"}}
    export = write_export(tmp_path, [newer, *(message_to_item(m) for m in messages()[1:])])
    summary = report(spark, stack, tmp_path / "out", "--export", export)
    said = "1 message item(s) of a newer release's format left out" in summary["source"]
    assert (summary["messages"], said) == (len(messages()) - 1, True)
