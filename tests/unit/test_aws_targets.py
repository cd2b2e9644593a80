"""AWS service targets in the core: their validation (400 naming the field), the allow-list matcher the stack
grants with, the payload limits (413 naming the field) and execution names."""

from __future__ import annotations

from typing import Any

import pytest
from hourglass.core import admission, aws_targets, limits, validation
from hourglass.core.aws_targets import KINDS, ArnRule
from hourglass.core.model import EventBridgeTarget, LambdaTarget, NewMessage, Queue, QueueSettings, StepFunctionsTarget
from hourglass.errors import ValidationError

from tests.conftest import NOW

ACCOUNT = "123456789012"
FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:target-fn"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:target-topic"
BUS = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/target-bus"
MACHINE = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:target-sm"
TARGETS: list[dict[str, Any]] = [
    {"type": "lambda", "function_arn": FUNCTION},
    {"type": "sns", "topic_arn": TOPIC},
    {"type": "eventbridge", "event_bus_arn": BUS, "source": "my.app", "detail_type": "Reminder"},
    {"type": "stepfunctions", "state_machine_arn": MACHINE},
]


def refused(doc: object, field: str = "target") -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        validation.target(doc, field)
    return caught.value


@pytest.mark.parametrize("doc", TARGETS, ids=lambda d: d["type"])
def test_each_target_type_reads_back_as_written(doc: dict[str, Any]) -> None:
    target = validation.target(doc)
    assert {k: v for k, v in vars(target).items()} == doc


@pytest.mark.parametrize("doc", TARGETS, ids=lambda d: d["type"])
def test_an_arn_of_another_service_is_a_400_naming_the_arn_field(doc: dict[str, Any]) -> None:
    field = KINDS[doc["type"]].field
    other = FUNCTION if doc["type"] != "lambda" else TOPIC
    assert refused({**doc, field: other}).field == f"target.{field}"


def test_an_unknown_field_of_a_target_is_named() -> None:
    assert refused({"type": "sns", "topic_arn": TOPIC, "source": "x"}).field == "target.source"


def test_an_event_source_of_aws_itself_is_refused() -> None:
    assert refused({"type": "eventbridge", "event_bus_arn": BUS, "source": "aws.ec2"}).field == "target.source"


def test_an_event_target_without_source_and_detail_type_gets_hourglass_defaults() -> None:
    target = validation.target({"type": "eventbridge", "event_bus_arn": BUS})
    assert isinstance(target, EventBridgeTarget) and (target.source, target.detail_type) == (
        "hourglass",
        "Hourglass Message",
    )


def test_a_qualified_function_arn_is_a_target() -> None:
    assert validation.target({"type": "lambda", "function_arn": f"{FUNCTION}:prod"}) == LambdaTarget(f"{FUNCTION}:prod")


def test_every_aws_target_type_may_be_a_failure_destination() -> None:
    for doc in TARGETS:
        assert validation.delivery_control({"failure_destination": doc}).failure_destination is not None


def test_a_name_pattern_allows_matching_names_only() -> None:
    rule = ArnRule.parse(KINDS["lambda"], "target*,billing")
    assert rule.allows(FUNCTION) and rule.allows(FUNCTION.replace("target-fn", "billing"))
    assert not rule.allows(FUNCTION.replace("target-fn", "billing-2"))


def test_an_arn_pattern_matches_as_iam_reads_it() -> None:
    rule = ArnRule.parse(KINDS["stepfunctions"], f"arn:aws:states:*:{ACCOUNT}:stateMachine:target-*")
    assert rule.allows(MACHINE) and not rule.allows(MACHINE.replace(ACCOUNT, "210987654321"))


def test_an_unqualified_name_does_not_allow_the_functions_aliases() -> None:
    # As IAM: `function:orders` grants no `function:orders:prod`; `orders*` grants both.
    assert not ArnRule.parse(KINDS["lambda"], "target-fn").allows(f"{FUNCTION}:prod")
    assert ArnRule.parse(KINDS["lambda"], "target-fn*").allows(f"{FUNCTION}:prod")


@pytest.mark.parametrize(
    "entry", ["*", "arn:aws:lambda:us-east-1:123456789012:function:*", "a b", FUNCTION.replace("lambda", "sns")]
)
def test_an_entry_without_a_name_prefix_or_of_another_shape_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        ArnRule.parse(KINDS["lambda"], entry)


def test_a_resource_of_the_stack_itself_is_refused_whatever_the_list_says() -> None:
    own = LambdaTarget(FUNCTION.replace("target-fn", "Hourglass-WorkersDispatcher-ABC"))
    assert aws_targets.refusal(own, "*Dispatcher*,Hourglass-Workers*", stack_name="Hourglass") == (
        "is one of Hourglass's own resources"
    )


def test_a_target_the_list_lacks_is_refused_naming_the_setting() -> None:
    reason = aws_targets.refusal(StepFunctionsTarget(MACHINE), "orders-*")
    assert reason is not None and "hourglass:stepfunctions_targets" in reason


def test_an_entry_overlapping_the_stacks_names_is_found() -> None:
    assert aws_targets.overlaps_stack("Hour*", KINDS["sns"], "Hourglass")
    assert not aws_targets.overlaps_stack("hourglass-*", KINDS["sns"], "Hourglass")


def test_execution_names_differ_per_attempt_and_stay_within_80_characters() -> None:
    names = {aws_targets.execution_name("a" * 64, tag) for tag in ("1", "2", "notice3")}
    assert len(names) == 3 and all(len(n) <= aws_targets.MAX_EXECUTION_NAME for n in names)


def queue_for(doc: dict[str, Any]) -> Queue:
    return Queue("orders", QueueSettings(target=validation.target(doc)), created_at=NOW)


@pytest.mark.parametrize(
    ("doc", "limit"),
    [
        (TARGETS[1], limits.SNS_MESSAGE_BYTES),
        (TARGETS[2], limits.EVENTBRIDGE_ENTRY_BYTES),
        (TARGETS[3], limits.STEPFUNCTIONS_INPUT_BYTES),
    ],
    ids=lambda v: v["type"] if isinstance(v, dict) else str(v),
)
def test_a_body_at_the_services_limit_is_admitted_and_one_byte_more_is_a_413(doc: dict[str, Any], limit: int) -> None:
    queue = queue_for(doc)
    frame = admission.admit(queue, NewMessage(body=""), NOW, "a" * 32)
    envelope = limits.payload_bytes(queue.settings.target, "") + limits.sqs_envelope_bytes(frame, 0)
    room = limit - envelope - 2  # the body is a JSON string: two quotes
    assert admission.admit(queue, NewMessage(body="x" * room), NOW, "a" * 32).body == "x" * room
    with pytest.raises(ValidationError) as caught:
        admission.admit(queue, NewMessage(body="x" * (room + 1)), NOW, "a" * 32)
    assert (caught.value.field, caught.value.code) == ("body", "too_large")


def test_an_event_entry_counts_its_source_and_detail_type() -> None:
    target = EventBridgeTarget(BUS, source="s" * 10, detail_type="d" * 20)
    assert limits.payload_bytes(target, "é") == 32


def test_a_lambda_target_allows_the_asynchronous_invoke_payload_of_1_mib() -> None:
    # Never reached: a stored message item (under DynamoDB's 400 KB) is smaller.
    assert limits.payload_limit(LambdaTarget(FUNCTION)) == 1024 * 1024 > limits.MAX_ITEM_BYTES
