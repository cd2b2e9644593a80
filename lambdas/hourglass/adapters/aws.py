"""boto3 client construction: one retry policy for every AWS call, endpoint from the environment."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

# Standard mode retries throttling (ProvisionedThroughputExceeded, ThrottlingException) and
# transient 5xx with exponential backoff and jitter.
AWS_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 6},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=32,
)


def client(service: str) -> Any:
    return boto3.client(service, config=AWS_CONFIG)
