"""The README's EMR Serverless commands run word for word with stand-ins for the AWS and CDK CLIs: the
job drivers they build are valid JSON, carry the package's submit parameters, and arguments the jobs accept.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline import packaging, report_job, schedule_job

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- emr-commands:"

# Answers what the block asks of AWS; records each start-job-run's --name and --job-driver.
AWS = """#!{python}
import json, os, re, sys
args = sys.argv[1:]
service, action = (args + ["", ""])[:2]
def option(name):
    return args[args.index(name) + 1] if name in args else None
if (service, action) == ("configure", "get"):
    print("us-east-1")
elif (service, action) == ("cloudformation", "describe-stacks"):
    print("stub-" + re.search(r"OutputKey=='(\\w+)'", option("--query")).group(1))
elif (service, action) == ("emr-serverless", "start-job-run"):
    runs = os.environ["STUB_RUNS"]
    run = f"run-{{len(os.listdir(runs))}}"
    with open(os.path.join(runs, run + ".json"), "w") as out:
        json.dump({{"name": option("--name"), "driver": json.loads(option("--job-driver"))}}, out)
    print(run)
elif (service, action) == ("emr-serverless", "get-job-run"):
    print("SUCCESS")
elif (service, action) == ("s3", "cp") and args[-1] == "-":
    sys.stdout.buffer.write(b"" if not args[2].endswith(".gz") else __import__("gzip").compress(b"driver log\\n"))
"""


def _block() -> str:
    text = (REPO / "pipeline" / "README.md").read_text()
    start = text.index("```sh\n", text.index(MARKER)) + len("```sh\n")
    return text[start : text.index("```", start)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    bin_dir = tmp_path_factory.mktemp("bin")
    recorded = tmp_path_factory.mktemp("runs")
    (bin_dir / "aws").write_text(AWS.format(python=sys.executable))
    (bin_dir / "cdk").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("aws", "cdk"):
        (bin_dir / tool).chmod((bin_dir / tool).stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", _block()],
        cwd=REPO,
        env={**env, "STUB_RUNS": str(recorded)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [json.loads(path.read_text()) for path in sorted(recorded.glob("run-*.json"))]


def _submit(run: dict[str, Any]) -> dict[str, Any]:
    submit: dict[str, Any] = run["driver"]["sparkSubmit"]
    return submit


def test_the_block_starts_a_schedule_run_then_a_report_run(runs: list[dict[str, Any]]) -> None:
    assert [run["name"] for run in runs] == ["hourglass-schedule", "hourglass-report"]


def test_every_run_uses_the_uploaded_package(runs: list[dict[str, Any]]) -> None:
    code = "s3://stub-BucketName/code"
    drivers = {(_submit(run)["entryPoint"], _submit(run)["sparkSubmitParameters"]) for run in runs}

    assert drivers == {(f"{code}/{packaging.ENTRY_POINT}", packaging.submit_parameters(code))}


def test_the_schedule_run_passes_arguments_the_job_accepts(runs: list[dict[str, Any]]) -> None:
    command, *argv = _submit(runs[0])["entryPointArguments"]
    args = schedule_job.parser().parse_args(argv)

    assert command == "schedule"
    assert (args.input, args.table, args.timer_queue_url, args.max_write_units) == (
        "s3://stub-BucketName/input/messages.csv",
        "stub-TableName",
        "stub-TimerQueueUrl",
        2000,
    )


def test_the_report_run_passes_arguments_the_job_accepts(runs: list[dict[str, Any]]) -> None:
    command, *argv = _submit(runs[1])["entryPointArguments"]
    args = report_job.parser().parse_args(argv)

    assert command == "report"
    assert (args.table, args.region) == ("stub-TableName", "us-east-1")
    assert args.out.startswith("s3://stub-BucketName/reports/")
