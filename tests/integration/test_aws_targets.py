"""Lambda, SNS, EventBridge and Step Functions targets end to end in process (moto): each receives the envelope,
throttling is retried with the queue's policy, access denied and not found end the message failed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from hourglass.adapters.service_targets import ServiceTargets
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.config import default_user_config

from tests.faults.proxies import FaultyClient
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post
from tests.integration.test_schedules import run_until

REGION = "us-east-1"
PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
RETRY = {"max_attempts": 3, "backoff_base": 1, "backoff_max": 1}


@dataclass
class Aws:
    """The targets' resources, made on first use (each feeding the `target-sink` queue where moto can), their
    clients behind fault-injecting proxies, and what Lambda was invoked with."""

    h: Harness
    clients: dict[str, FaultyClient]
    invoked: list[Any] = field(default_factory=list)
    made: dict[str, str] = field(default_factory=dict)

    def once(self, name: str, make: Any) -> str:
        if name not in self.made:
            self.made[name] = make()
        return self.made[name]

    @property
    def sink(self) -> str:
        return self.once("sink", lambda: self.h.sqs.create_queue(QueueName="target-sink")["QueueUrl"])

    @property
    def sink_arn(self) -> str:
        got = self.h.sqs.get_queue_attributes(QueueUrl=self.sink, AttributeNames=["QueueArn"])
        return str(got["Attributes"]["QueueArn"])

    @property
    def role(self) -> str:
        iam = boto3.client("iam", region_name=REGION)
        return self.once("role", lambda: iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"])

    @property
    def function(self) -> str:
        code = {"ZipFile": b"PK"}
        make = self.clients["lambda"].create_function
        return self.once(
            "function",
            lambda: make(FunctionName="target-fn", Runtime="python3.12", Role=self.role, Handler="h.h", Code=code)[
                "FunctionArn"
            ],
        )

    @property
    def topic(self) -> str:
        return self.once("topic", self._topic)

    def _topic(self) -> str:
        sns = self.clients["sns"]
        topic = str(sns.create_topic(Name="target-topic")["TopicArn"])
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=self.sink_arn, Attributes={"RawMessageDelivery": "true"})
        return topic

    @property
    def bus(self) -> str:
        return self.once("bus", self._bus)

    def _bus(self) -> str:
        events = self.clients["events"]
        bus = str(events.create_event_bus(Name="target-bus")["EventBusArn"])
        events.put_rule(Name="to-sink", EventBusName="target-bus", EventPattern=json.dumps({"source": ["my.app"]}))
        events.put_targets(Rule="to-sink", EventBusName="target-bus", Targets=[{"Id": "sink", "Arn": self.sink_arn}])
        return bus

    @property
    def machine(self) -> str:
        make = self.clients["stepfunctions"].create_state_machine
        return self.once(
            "machine", lambda: make(name="target-sm", definition=PASS, roleArn=self.role)["stateMachineArn"]
        )

    def sink_bodies(self) -> list[Any]:
        got = self.h.sqs.receive_message(QueueUrl=self.sink, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]


@pytest.fixture
def aws(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    """The four target types allowed by the harness's settings (`target*`); Lambda without Docker, its
    invocations recorded."""
    monkeypatch.setitem(default_user_config, "lambda", {"use_docker": False})
    services = ("lambda", "sns", "events", "stepfunctions")
    state = Aws(harness, {s: FaultyClient(boto3.client(s, region_name=REGION)) for s in services})
    real_invoke = LambdaSimpleBackend.invoke

    def recording(self: LambdaSimpleBackend, name: str, qualifier: Any, body: Any, *args: Any) -> Any:
        state.invoked.append({"function": name, "event": json.loads(body)})
        return real_invoke(self, name, qualifier, body, *args)

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", recording)
    harness.ctx.services = ServiceTargets.from_clients(lambda service: state.clients[service])
    allowed = "target*"
    harness.ctx.settings = replace(
        harness.ctx.settings,
        lambda_targets=allowed,
        sns_targets=allowed,
        eventbridge_targets=allowed,
        stepfunctions_targets=allowed,
    )
    yield state


def deliver(h: Harness, target: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """One message to `target` on a queue retrying 3 times, its timers run until it ends."""
    make_queue(h, settings={"target": target, "retry": RETRY, **settings})
    [created] = post(h, {"body": {"n": 1}})
    message = get(h, created["id"])
    while message["status"] == "pending":
        h.dispatch(h.timers() or [])
        message = get(h, created["id"])
        if message["status"] == "pending":
            h.clock.advance(5)
            h.sweep()
    return message


def envelope(message: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    return {
        "id": message["id"],
        "queue": "orders",
        "body": message["body"],
        "due_at": message["due_at"],
        "attempt": attempt,
    }


def test_a_lambda_target_is_invoked_asynchronously_with_the_envelope(harness: Harness, aws: Aws) -> None:
    message = deliver(harness, {"type": "lambda", "function_arn": aws.function})
    assert message["status"] == "delivered"
    assert aws.invoked == [{"function": aws.function, "event": envelope(message)}]


def test_an_sns_target_publishes_the_envelope_to_the_topics_subscribers(harness: Harness, aws: Aws) -> None:
    message = deliver(harness, {"type": "sns", "topic_arn": aws.topic})
    assert message["status"] == "delivered" and aws.sink_bodies() == [envelope(message)]


def test_an_eventbridge_target_puts_the_envelope_as_the_events_detail(harness: Harness, aws: Aws) -> None:
    target = {"type": "eventbridge", "event_bus_arn": aws.bus, "source": "my.app", "detail_type": "Reminder"}
    message = deliver(harness, target)
    [event] = aws.sink_bodies()
    assert message["status"] == "delivered"
    assert (event["source"], event["detail-type"], event["detail"]) == ("my.app", "Reminder", envelope(message))


def test_a_stepfunctions_target_starts_an_execution_named_after_the_message_and_attempt(
    harness: Harness, aws: Aws
) -> None:
    message = deliver(harness, {"type": "stepfunctions", "state_machine_arn": aws.machine})
    sfn = aws.clients["stepfunctions"]
    [execution] = sfn.list_executions(stateMachineArn=aws.machine)["executions"]
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    assert message["status"] == "delivered" and described["name"] == f"{message['id']}-1"
    assert json.loads(described["input"]) == envelope(message)


def test_a_repeated_start_of_the_same_attempt_counts_as_delivered(harness: Harness, aws: Aws) -> None:
    aws.clients["stepfunctions"].fail("start_execution", code="ExecutionAlreadyExists", status=400)
    message = deliver(harness, {"type": "stepfunctions", "state_machine_arn": aws.machine})
    assert (message["status"], message["attempts"]) == ("delivered", 1)


@pytest.mark.parametrize(
    ("service", "operation", "code", "status"),
    [
        ("lambda", "invoke", "TooManyRequestsException", 429),
        ("sns", "publish", "Throttled", 400),
        ("events", "put_events", "InternalException", 500),
        ("stepfunctions", "start_execution", "ThrottlingException", 400),
    ],
)
def test_throttling_and_5xx_are_retried_with_the_queues_policy(
    harness: Harness, aws: Aws, service: str, operation: str, code: str, status: int
) -> None:
    aws.clients[service].fail(operation, code=code, status=status, times=1)
    message = deliver(harness, target_of(aws, service))
    assert (message["status"], message["attempts"]) == ("delivered", 2)


@pytest.mark.parametrize(
    ("service", "operation", "code", "status"),
    [
        ("lambda", "invoke", "AccessDeniedException", 403),
        ("sns", "publish", "NotFound", 404),
        ("stepfunctions", "start_execution", "StateMachineDoesNotExist", 400),
    ],
)
def test_access_denied_and_not_found_end_the_message_failed_with_the_services_reason(
    harness: Harness, aws: Aws, service: str, operation: str, code: str, status: int
) -> None:
    aws.clients[service].fail(operation, code=code, status=status, times=None)
    message = deliver(harness, target_of(aws, service))
    assert (message["status"], message["attempts"]) == ("failed", 1)
    assert code in message["last_error"]


def test_a_refused_event_entry_ends_the_message_failed(harness: Harness, aws: Aws) -> None:
    target = {"type": "eventbridge", "event_bus_arn": aws.bus.replace("target-bus", "target-gone")}
    message = deliver(harness, target)
    assert message["status"] == "failed" and "ResourceNotFoundException" in message["last_error"]


def test_a_failure_notice_goes_to_an_sns_destination(harness: Harness, aws: Aws) -> None:
    aws.clients["lambda"].fail("invoke", code="AccessDeniedException", status=403, times=None)
    destination = {"type": "sns", "topic_arn": aws.topic}
    message = deliver(harness, {"type": "lambda", "function_arn": aws.function}, failure_destination=destination)
    [notice] = aws.sink_bodies()
    assert (notice["event"], notice["id"]) == ("message.failed", message["id"])


def test_a_schedules_occurrences_are_published_to_its_sns_target(harness: Harness, aws: Aws) -> None:
    make_queue(harness)
    target = {"type": "sns", "topic_arn": aws.topic}
    status, _ = harness.call(
        "PUT", "/v1/queues/orders/schedules/tick", {"every": 60, "body": {"n": 1}, "target": target}
    )
    assert status == 201
    run_until(harness, harness.clock.now + timedelta(seconds=60))
    delivered = harness.call("GET", "/v1/queues/orders/messages", params={"status": "delivered"})[1]["messages"]
    published = sorted(aws.sink_bodies(), key=lambda e: e["due_at"])
    assert delivered and published == [
        {**envelope(m), "schedule": "tick"} for m in sorted(delivered, key=lambda m: m["due_at"])
    ]


@pytest.mark.parametrize("service", ["lambda", "events"])
def test_a_target_the_stack_does_not_allow_is_a_400_naming_its_arn(harness: Harness, aws: Aws, service: str) -> None:
    target = target_of(aws, service)
    field = next(key for key in target if key.endswith("_arn"))
    target[field] = target[field].replace(":target-", ":other-").replace("/target-", "/other-")
    status, doc = harness.call("PUT", "/v1/queues/orders", {"target": target})
    assert status == 400 and f"target.{field}" in doc["error"]["message"]


def target_of(aws: Aws, service: str) -> dict[str, Any]:
    return {
        "lambda": {"type": "lambda", "function_arn": aws.function},
        "sns": {"type": "sns", "topic_arn": aws.topic},
        "events": {"type": "eventbridge", "event_bus_arn": aws.bus, "source": "my.app"},
        "stepfunctions": {"type": "stepfunctions", "state_machine_arn": aws.machine},
    }[service]
