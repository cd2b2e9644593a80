"""boto3 client construction: one retry policy for every AWS call, endpoint from the environment; and the
errors of a call to a target service, judged (`core.delivery.service_refusal`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from hourglass.core import delivery
from hourglass.errors import DeliveryError

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


class LazyClient:
    """An adapter whose client (of `service`) is built on first use unless given: most deployments never
    call most target services, and a cold start should not pay for their clients."""

    service: ClassVar[str]

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = client(self.service)
        return self._client


@contextmanager
def target_call(service: str) -> Iterator[None]:
    """One call to a target service (after botocore's own retries): its ClientError becomes the judged
    DeliveryError, a connection failure a retryable one."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(error.get("Code", ""))
        raise delivery.service_refusal(service, code, status, str(error.get("Message") or exc)) from exc
    except BotoCoreError as exc:
        raise DeliveryError(f"{service} connection: {exc}", retryable=True) from exc
