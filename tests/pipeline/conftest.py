"""Pipeline fixtures: one local Spark for the session, and the real stack deployed into a moto server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import boto3
import pytest
from hourglass.adapters.store import Store
from hourglass.core import validation
from hourglass.core.model import Queue
from pyspark.sql import SparkSession

from devstack.deploy import deploy, synth
from pipeline.deployment import Deployment
from pipeline.session import spark_session
from tests.local_stack import embedded_moto

REGION = "us-east-1"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session(
        "hourglass-tests",
        "local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
        },
    )
    yield session
    session.stop()


@dataclass(frozen=True)
class Stack:
    endpoint: str
    deployment: Deployment
    outputs: dict[str, str]

    def store(self) -> Store:
        return Store(self.deployment.table, client=self.deployment.client("dynamodb"))

    def create_queue(self, name: str, settings: dict[str, object] | None = None) -> Queue:
        queue = Queue(name, validation.queue_settings(settings or {}), datetime.now(UTC))
        self.store().put_queue(queue)
        return queue


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The Hourglass stack synthesized and deployed through CloudFormation into a 127.0.0.1 moto server."""
    with embedded_moto() as endpoint:
        outputs = deploy(synth(tmp_path_factory.mktemp("cdk.out"), {}), endpoint_url=endpoint, region=REGION)
        # As `make dev` does: moto's own SQS event source would try to run the dispatcher in Docker
        # on every send and take the timer messages this suite looks at.
        functions = boto3.client("lambda", endpoint_url=endpoint, region_name=REGION)
        for mapping in functions.list_event_source_mappings()["EventSourceMappings"]:
            functions.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
        located = Deployment(
            table=outputs["TableName"], timer_queue_url=outputs["TimerQueueUrl"], endpoint_url=endpoint, region=REGION
        )
        yield Stack(endpoint, located, outputs)
