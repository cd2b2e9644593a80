"""The SparkSession the jobs run in: local unless spark-submit (or EMR Serverless) chose a master."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import hourglass
from hourglass.logs import log
from pyspark.sql import SparkSession

import pipeline
from pipeline import deployment, io

SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    # The jobs log their own progress lines; Spark's console bar would garble them.
    "spark.ui.showConsoleProgress": "false",
    # The UDFs are plain Python (no pandas/pyarrow on the cluster); Spark 4 would warn and fall back.
    "spark.sql.execution.pythonUDF.arrow.enabled": "false",
}


def spark_session(app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    _local_workers_like_driver()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in {**SETTINGS, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def run_job(
    app_name: str,
    master: str | None,
    run: Callable[[SparkSession], dict[str, Any]],
    done: Callable[[dict[str, Any]], str],
) -> int:
    """A job's exit code: 2 with the message for bad input or an unreadable deployment; else 0,
    after logging its summary and printing `done(summary)`. The session stops either way."""
    spark = spark_session(app_name, master)
    try:
        summary = run(spark)
    except (io.InputError, deployment.DeploymentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    log("summary", **summary)
    print(done(summary))
    return 0


def _local_workers_like_driver() -> None:
    """Python workers started from here run this interpreter with this import path.

    Under spark-submit (EMR Serverless) the gateway already exists and the submitter's settings
    (the packaged venv, --py-files) apply instead.
    """
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    roots = [str(Path(str(package.__file__)).resolve().parents[1]) for package in (hourglass, pipeline)]
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*roots, *current]))
