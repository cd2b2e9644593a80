"""The Lambda entry points, configured only by their environment, under mock_aws."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hourglass.handlers import api, dispatcher, sweeper
from moto import mock_aws

from tests.integration.conftest import create_table


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        timer_url = sqs.create_queue(QueueName="timer")["QueueUrl"]
        target_url = sqs.create_queue(QueueName="target")["QueueUrl"]
        monkeypatch.setenv("HOURGLASS_TABLE", create_table(ddb))
        monkeypatch.setenv("HOURGLASS_TIMER_QUEUE_URL", timer_url)
        monkeypatch.setenv("HOURGLASS_LOG_LEVEL", "WARNING")
        monkeypatch.setenv("HOURGLASS_SQS_TARGETS", "target")
        for cached in (api._api, sweeper._context, dispatcher._dispatcher):
            cached.cache_clear()
        yield {"sqs": sqs, "timer_url": timer_url, "target_url": target_url}
        for cached in (api._api, sweeper._context, dispatcher._dispatcher):
            cached.cache_clear()


def proxy(method: str, path: str, body: Any = None) -> dict[str, Any]:
    event = {"httpMethod": method, "path": path, "headers": {}, "body": None if body is None else json.dumps(body)}
    return api.handler(event, None)


def test_ingest_handler_creates_a_queue(lambda_env: dict[str, Any]) -> None:
    response = proxy("PUT", "/v1/queues/orders", {"target": {"type": "sqs", "queue_url": lambda_env["target_url"]}})
    assert response["statusCode"] == 201
    assert json.loads(response["body"])["name"] == "orders"


def test_ingest_handler_rejects_an_unknown_route(lambda_env: dict[str, Any]) -> None:
    response = proxy("GET", "/v2/nothing")
    assert (response["statusCode"], json.loads(response["body"])["error"]["code"]) == (404, "not_found")


def test_a_method_a_route_lacks_is_a_405_naming_the_allowed_ones(lambda_env: dict[str, Any]) -> None:
    response = proxy("PATCH", "/v1/queues/orders")
    assert (response["statusCode"], response["headers"]["Allow"]) == (405, "PUT, GET, DELETE")


def test_dispatcher_handler_delivers_and_reports_poison_as_a_batch_failure(lambda_env: dict[str, Any]) -> None:
    proxy("PUT", "/v1/queues/orders", {"target": {"type": "sqs", "queue_url": lambda_env["target_url"]}})
    proxy("POST", "/v1/queues/orders/messages", {"messages": [{"body": {"n": 1}}]})
    timer = lambda_env["sqs"].receive_message(QueueUrl=lambda_env["timer_url"])["Messages"][0]
    event = {
        "Records": [
            {"messageId": "good", "body": timer["Body"]},
            {"messageId": "poison", "body": "not a timer"},
        ]
    }
    result = dispatcher.handler(event, None)
    delivered = lambda_env["sqs"].receive_message(QueueUrl=lambda_env["target_url"])["Messages"]
    assert result == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    assert json.loads(delivered[0]["Body"])["body"] == {"n": 1}


def test_sweeper_handler_reports_what_it_did(lambda_env: dict[str, Any]) -> None:
    report = sweeper.handler({"source": "aws.events"}, None)
    assert report["complete"] is True and report["handed_off"] == 0
