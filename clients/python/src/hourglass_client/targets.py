"""Target documents for a queue, a message or a schedule (`target=`), one builder per target type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def http(url: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An HTTP callback (POST), with extra headers if given."""
    return {"type": "http", "url": url, **({"headers": dict(headers)} if headers else {})}


def sqs(queue_url: str) -> dict[str, Any]:
    return {"type": "sqs", "queue_url": queue_url}


def lambda_function(function_arn: str) -> dict[str, Any]:
    """A Lambda function, invoked asynchronously (`Event`) with the envelope as its event."""
    return {"type": "lambda", "function_arn": function_arn}


def sns_topic(topic_arn: str) -> dict[str, Any]:
    return {"type": "sns", "topic_arn": topic_arn}


def event_bus(event_bus_arn: str, *, source: str | None = None, detail_type: str | None = None) -> dict[str, Any]:
    """An EventBridge bus; the envelope is the event's `detail` (source and detail type default on the server)."""
    optional = {k: v for k, v in (("source", source), ("detail_type", detail_type)) if v is not None}
    return {"type": "eventbridge", "event_bus_arn": event_bus_arn, **optional}


def state_machine(state_machine_arn: str) -> dict[str, Any]:
    """A Step Functions state machine: one execution per attempt, the envelope as its input."""
    return {"type": "stepfunctions", "state_machine_arn": state_machine_arn}
