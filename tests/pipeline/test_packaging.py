"""The EMR package's parts: what the code zip holds, the pins of the runtime, the submit parameters."""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path
from typing import Any

from pipeline import packaging, schedule_job


def test_the_code_zip_holds_both_packages_and_no_caches(tmp_path: Path) -> None:
    packaging.code_zip(tmp_path / "code.zip")

    names = zipfile.ZipFile(tmp_path / "code.zip").namelist()
    assert {"hourglass/__init__.py", "hourglass/core/validation.py", "pipeline/schedule_job.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.startswith("pipeline/out/")]


def test_the_runtime_packages_are_pinned_as_the_tests_ran_them() -> None:
    import boto3
    import matplotlib

    assert packaging.pinned() == [f"boto3=={boto3.__version__}", f"matplotlib=={matplotlib.__version__}"]


def test_submit_parameters_unpack_the_runtime_and_point_python_into_it() -> None:
    conf = dict(p.split("=", 1) for p in shlex.split(packaging.submit_parameters("s3://b/code")) if p != "--conf")

    assert conf["spark.archives"] == "s3://b/code/pyenv.tar.gz#environment"
    assert conf["spark.submit.pyFiles"] == "s3://b/code/hourglass_pipeline.zip"
    assert conf["spark.pyspark.python"] == conf["spark.executorEnv.PYSPARK_PYTHON"] == "./environment/bin/python"


class Context:
    def __init__(self, conf: dict[str, str], parallelism: int = 2) -> None:
        self.conf = conf
        self.defaultParallelism = parallelism

    def getConf(self) -> Any:
        return self.conf


def test_write_tasks_are_counted_at_the_dynamic_allocation_maximum() -> None:
    dynamic = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.maxExecutors": "6",
        "spark.executor.cores": "4",
    }

    assert schedule_job.max_concurrent_tasks(Context(dynamic)) == 24  # type: ignore[arg-type]
    assert schedule_job.max_concurrent_tasks(Context({}, parallelism=8)) == 8  # type: ignore[arg-type]
