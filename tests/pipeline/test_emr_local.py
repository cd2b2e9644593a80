"""The EMR Serverless package run as the cluster runs it: spark-submit on a local cluster (executors in
their own processes, the runtime archive unpacked in each one's directory), same entry point and
arguments as start-job-run, against the deployed stack in a moto server. `make emr-local`.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from hourglass.adapters.items import message_key
from hourglass.core import ids

from pipeline import packaging
from tests.pipeline.conftest import REGION, Stack

pytestmark = [pytest.mark.spark, pytest.mark.emr, pytest.mark.timeout(2400)]

SPARK_HOME = Path(pyspark.__file__).parent
MASTER = "local-cluster[2,1,1024]"
HEADER = ["queue", "body", "delay"]


@dataclass(frozen=True)
class Submitted:
    code: int
    seconds: float
    log: str
    summary: dict[str, Any]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make emr-package`'s output (HOURGLASS_EMR_PACKAGE), else a fresh build."""
    given = os.environ.get("HOURGLASS_EMR_PACKAGE")
    if given:
        return Path(given).resolve()
    return packaging.build(tmp_path_factory.mktemp("emr"))


def _unpack(archive: Path, into: Path) -> Path:
    """The runtime unpacked as `into/environment` (what Spark does with `#environment`)."""
    target = into / packaging.ENVIRONMENT
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="tar")
    return target


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, package: Path) -> Path:
    """The driver's working directory, holding the runtime as ./environment (what EMR Serverless does),
    and a SPARK_HOME of links to PySpark's, so the local cluster's work/ directory lands here."""
    home = tmp_path_factory.mktemp("driver")
    _unpack(package / packaging.RUNTIME, home)
    spark_home = home / "spark-home"
    spark_home.mkdir()
    for entry in SPARK_HOME.iterdir():
        (spark_home / entry.name).symlink_to(entry)
    return home


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Path:
    """A directory of two CSV files, none with dedup ids: b.csv's rows come after a.csv's."""
    stack.create_queue("emr-orders")
    folder = tmp_path_factory.mktemp("input") / "batch"
    folder.mkdir()
    files = {
        "a.csv": [["emr-orders", '{"n": 1}', "0"], ["emr-orders", '{"n": 2}', "7200"], ["emr-nope", "{}", "1"]],
        "b.csv": [["emr-orders", "text", "3600"], ["emr-orders", "{}", "later"], ["emr-orders", "[3]", "60"]],
    }
    for name, rows in files.items():
        with (folder / name).open("w", newline="") as out:
            csv.writer(out).writerows([HEADER, *rows])
    return folder


def submit(package: Path, cluster: Path, stack: Stack, arguments: list[str], summary: Path | None) -> Submitted:
    """spark-submit of main.py with the README's sparkSubmitParameters; the package is the 'bucket'."""
    command = [
        str(cluster / "spark-home" / "bin" / "spark-submit"),
        *("--master", MASTER),
        *shlex.split(packaging.submit_parameters(package.as_uri())),
        *("--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=768m"),
        str(package / packaging.ENTRY_POINT),
        *arguments,
        *("--endpoint-url", stack.endpoint),
    ]
    # Nothing of this checkout's venv: the driver and the executors get Python and boto3 from the archive.
    env = {
        "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p),
        "HOME": str(cluster),
        "SPARK_HOME": str(cluster / "spark-home"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=cluster, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    (cluster / f"{arguments[0]}-{int(started)}.log").write_text(output)
    written = json.loads(summary.read_text()) if summary is not None and summary.exists() else {}
    return Submitted(done.returncode, seconds, output, written)


def schedule_arguments(stack: Stack, inputs: Path, out: Path) -> list[str]:
    """The README's bulk-scheduling entryPointArguments (local paths for the bucket's)."""
    return [
        "schedule",
        *("--input", str(inputs), "--table", stack.deployment.table),
        *("--timer-queue-url", str(stack.deployment.timer_queue_url), "--region", REGION),
        *("--rejects", str(out / "rejects.csv"), "--summary", str(out / "summary.json")),
        *("--max-write-units", "200"),
    ]


@pytest.fixture(scope="module")
def first(package: Path, cluster: Path, stack: Stack, inputs: Path) -> Submitted:
    out = cluster / "first"
    shutil.rmtree(out, ignore_errors=True)
    run = submit(package, cluster, stack, schedule_arguments(stack, inputs, out), out / "summary.json")
    assert run.code == 0, run.log[-5000:]
    return run


def test_executors_unpack_the_runtime_in_their_own_directories(first: Submitted, cluster: Path) -> None:
    unpacked = sorted(cluster.glob("spark-home/work/app-*/*/environment/bin/python3.*"))

    assert len(unpacked) == 2, first.log[-3000:]


def test_summary_counts_the_directory_once(first: Submitted) -> None:
    counts = {k: first.summary[k] for k in ("files", "read", "scheduled", "duplicate", "rejected", "handed_off")}

    assert counts == {"files": 2, "read": 6, "scheduled": 4, "duplicate": 0, "rejected": 2, "handed_off": 2}
    assert first.summary["throttled"] == 0 and first.summary["write_units"] >= 4


def test_rejects_name_the_row_over_the_sorted_files(first: Submitted, cluster: Path) -> None:
    with (cluster / "first" / "rejects.csv").open() as rejects:
        rows = list(csv.DictReader(rejects))

    assert rows == [
        {"row": "3", "queue": "emr-nope", "reason": "queue: queue emr-nope does not exist"},
        {"row": "5", "queue": "emr-orders", "reason": "delay: must be a number"},
    ]


def test_ids_come_from_file_and_position(first: Submitted, stack: Stack) -> None:
    client = stack.deployment.client("dynamodb")

    def body(key: str) -> Any:
        got = client.get_item(
            TableName=stack.deployment.table, Key=message_key("emr-orders", ids.deterministic_id("emr-orders", key))
        )
        return json.loads(got["Item"]["body"]["S"]) if "Item" in got else None

    assert [body(f"row:batch/{k}") for k in ("a.csv:1", "a.csv:2", "b.csv:1", "b.csv:3")] == [
        {"n": 1},
        {"n": 2},
        "text",
        [3],
    ]


def test_a_rerun_adds_nothing(first: Submitted, package: Path, cluster: Path, stack: Stack, inputs: Path) -> None:
    out = cluster / "again"

    again = submit(package, cluster, stack, schedule_arguments(stack, inputs, out), out / "summary.json")

    assert again.code == 0, again.log[-5000:]
    assert {k: again.summary[k] for k in ("read", "scheduled", "duplicate", "rejected")} == {
        "read": 6,
        "scheduled": 0,
        "duplicate": 4,
        "rejected": 2,
    }


def test_the_report_runs_on_the_cluster(first: Submitted, package: Path, cluster: Path, stack: Stack) -> None:
    out = cluster / "report"
    arguments = ["report", "--table", stack.deployment.table, "--region", REGION, "--out", str(out)]

    run = submit(package, cluster, stack, arguments, out / "summary.json")

    assert run.code == 0, run.log[-5000:]
    assert run.summary["messages"] >= 4
    assert run.summary["status"]["pending"] >= 4
    assert (out / "charts" / "lateness.png").read_bytes()[:4] == b"\x89PNG"
    assert "# Hourglass delivery report" in (out / "report.md").read_text()
    with (out / "csv" / "status_by_queue.csv").open() as table:
        assert "emr-orders" in {row["queue"] for row in csv.DictReader(table)}
