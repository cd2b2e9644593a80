"""End to end to the AWS service targets: the dispatcher invokes a Lambda function, publishes to an SNS topic,
puts an event on an EventBridge bus and starts a Step Functions execution, and each receiver keeps the envelope
where the test reads it (an SQS queue, or the execution's input). Deployed only (`make test-deployed`): in
process the same deliveries are tests/integration/test_aws_targets.py's, without a runtime of their own.
"""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import MODES, Client, Stack

pytestmark = pytest.mark.skipif("deployed" not in MODES, reason="the deployed mode's targets: make test-deployed")
# The deployed stack allows, for every type, resources named `target*` (devstack.config.LOCAL_SERVICE_TARGETS).
PREFIX = "target-e2e"
DELIVERY_TIMEOUT = 60.0
# Writes the event it was invoked with into the queue its environment names: what the test reads.
RECORDER = """
import os, json, boto3

def handler(event, context):
    boto3.client("sqs").send_message(QueueUrl=os.environ["GOT_QUEUE"], MessageBody=json.dumps(event))
"""


def _name() -> str:
    return f"{PREFIX}-{uuid.uuid4().hex[:8]}"


def _queue(stack: Stack) -> tuple[str, str]:
    sqs = stack.client("sqs")
    url = sqs.create_queue(QueueName=_name())["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _deliver(api: Client, target: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    queue = f"q{uuid.uuid4().hex[:10]}"
    status, doc = api.call("PUT", f"/v1/queues/{queue}", {"target": target})
    assert status == 201, doc
    status, doc = api.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": body, "delay": 1}]})
    assert status == 201, doc
    return dict(doc["messages"][0])


def _first(read: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while time.monotonic() < deadline:
        got = read()
        if got is not None:
            return got
        time.sleep(0.5)
    raise AssertionError(f"nothing arrived within {DELIVERY_TIMEOUT:g} s")


def _received(stack: Stack, queue_url: str) -> Callable[[], Any]:
    def read() -> Any:
        messages = stack.client("sqs").receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages")
        return json.loads(messages[0]["Body"]) if messages else None

    return read


def _recorder(stack: Stack, got_queue: str) -> str:
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("recorder.py", RECORDER)
    function = stack.client("lambda").create_function(
        FunctionName=_name(),
        Runtime="python3.12",
        Role="arn:aws:iam::000000000000:role/target-e2e-recorder",
        Handler="recorder.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": {"GOT_QUEUE": got_queue}},
        Timeout=30,
    )
    return str(function["FunctionArn"])


def test_lambda_target_is_invoked_with_the_envelope(api: Client, stack: Stack) -> None:
    if stack.mode != "deployed":
        pytest.skip("moto runs Lambda functions only in Docker: the in-process tests record the invoke instead")
    got_queue, _ = _queue(stack)
    function_arn = _recorder(stack, got_queue)
    created = _deliver(api, {"type": "lambda", "function_arn": function_arn}, {"to": "lambda"})
    event = _first(_received(stack, got_queue))
    assert (event["id"], event["body"], event["attempt"]) == (created["id"], {"to": "lambda"}, 1)


def test_sns_target_reaches_a_queue_subscribed_to_the_topic(api: Client, stack: Stack) -> None:
    sns = stack.client("sns")
    topic_arn = sns.create_topic(Name=_name())["TopicArn"]
    got_queue, queue_arn = _queue(stack)
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    created = _deliver(api, {"type": "sns", "topic_arn": topic_arn}, {"to": "sns"})
    envelope = _first(_received(stack, got_queue))
    assert (envelope["id"], envelope["body"]) == (created["id"], {"to": "sns"})


def test_eventbridge_target_reaches_a_queue_a_rule_targets(api: Client, stack: Stack) -> None:
    events = stack.client("events")
    bus = _name()
    bus_arn = events.create_event_bus(Name=bus)["EventBusArn"]
    got_queue, queue_arn = _queue(stack)
    rule = _name()
    # By the bus's name: MiniStack's PutRule does not find a bus by its ARN.
    events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps({"source": ["e2e.hourglass"]}))
    events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "got", "Arn": queue_arn}])
    target = {"type": "eventbridge", "event_bus_arn": bus_arn, "source": "e2e.hourglass", "detail_type": "Due"}
    created = _deliver(api, target, {"to": "eventbridge"})
    event = _first(_received(stack, got_queue))
    assert (event["detail-type"], event["detail"]["id"], event["detail"]["body"]) == (
        "Due",
        created["id"],
        {"to": "eventbridge"},
    )


def test_stepfunctions_target_starts_an_execution_with_the_envelope(api: Client, stack: Stack) -> None:
    sfn = stack.client("stepfunctions")
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    machine_arn = sfn.create_state_machine(
        name=_name(),
        definition=json.dumps(definition),
        roleArn="arn:aws:iam::000000000000:role/target-e2e-states",
    )["stateMachineArn"]
    created = _deliver(api, {"type": "stepfunctions", "state_machine_arn": machine_arn}, {"to": "sfn"})

    def started() -> Any:
        executions = sfn.list_executions(stateMachineArn=machine_arn)["executions"]
        return executions[0] if executions else None

    execution = _first(started)
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    envelope = json.loads(described["input"])
    assert (envelope["id"], envelope["body"]) == (created["id"], {"to": "sfn"})
    assert created["id"] in execution["name"]
