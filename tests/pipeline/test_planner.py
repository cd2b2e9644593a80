"""One row to one planned message, with exactly the REST API's validation and deterministic ids."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hourglass import contract
from hourglass.core import keys, message_partitions, validation
from hourglass.core.model import Queue
from hourglass.errors import ValidationError

from pipeline import cells, schedule_job
from pipeline.deployment import Deployment
from pipeline.planner import STRICT, Planner

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
QUEUES = {"orders": Queue("orders", validation.queue_settings({"max_delay": 3600}), NOW)}
TIMER_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/Hourglass-TimerQueue"
# As a stack deployed with hourglass:sqs_targets=["target*"] and hourglass:lambda_targets=["target*"].
STACK = replace(STRICT, timer_queue_url=TIMER_QUEUE, sqs_targets="target*", lambda_targets="target*")


def plan(doc: object, row: int = 1, source: str = "in.csv", allow_private: bool = False) -> tuple[object, ...]:
    stack = replace(STACK, allow_private_callbacks=allow_private)
    return Planner(QUEUES, NOW, source, stack=stack).plan(row, json.dumps(doc))


def sqs_row(name: str) -> dict[str, object]:
    url = f"https://sqs.us-east-1.amazonaws.com/123456789012/{name}"
    return {"queue": "orders", "body": 1, "target": {"type": "sqs", "queue_url": url}}


@pytest.mark.parametrize(
    "doc",
    [
        {"body": 1, "delay": -1},
        {"body": 1, "delay": 1, "deliver_at": "2026-11-21T11:00:00Z"},
        {"body": 1, "deliver_at": "tomorrow"},
        {"body": 1, "ttl": 0},
        {"body": 1, "dedup_id": ""},
        {"body": 1, "target": {"type": "sqs"}},
        {"body": 1, "colour": "red"},
        {"delay": 1},
    ],
)
def test_reason_is_the_rest_apis_message_for_the_same_field(doc: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as api:
        validation.message_batch({"messages": [doc]}, QUEUES["orders"].settings, NOW)

    reason = plan({"queue": "orders", **doc})[-1]

    assert reason == api.value.message.replace("messages[0].", "", 1)


def test_same_row_of_the_same_source_gets_the_same_id() -> None:
    first, again, other_row, other_file = (
        plan({"queue": "orders", "body": 1}),
        plan({"queue": "orders", "body": 2}),
        plan({"queue": "orders", "body": 1}, row=2),
        plan({"queue": "orders", "body": 1}, source="other.csv"),
    )

    assert first[1] == again[1]
    assert len({first[1], other_row[1], other_file[1]}) == 3


def test_a_row_of_a_queue_the_load_spreads_gets_the_spread_form_of_its_id() -> None:
    doc = json.dumps({"queue": "orders", "body": 1})
    plain = Planner(QUEUES, NOW, "in.csv", stack=STACK).plan(1, doc)
    spread = Planner(QUEUES, NOW, "in.csv", stack=STACK, spread=frozenset({"orders"})).plan(1, doc)
    assert isinstance(plain[1], str) and isinstance(spread[1], str)
    assert (keys.spread_of(plain[1]), keys.spread_of(spread[1])) == (1, message_partitions.PARTITIONS)
    assert spread[1] == keys.spread_id(plain[1], message_partitions.PARTITIONS)


def test_private_callback_is_refused_unless_allowed() -> None:
    doc = {"queue": "orders", "body": 1, "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}}

    assert plan(doc)[-1] == "target: host '127.0.0.1' resolves to a private or reserved address"
    assert plan(doc, allow_private=True)[-1] is None


def test_sqs_target_the_stack_does_not_allow_is_rejected() -> None:
    reason = plan(sqs_row("payments"))[-1]

    assert reason.startswith("target.queue_url: is not an allowed SQS target")


def test_sqs_target_the_stack_allows_is_planned() -> None:
    planned = plan(sqs_row("target-orders"))

    assert planned[-1] is None
    assert planned[3] == "pending"


def test_the_timer_queue_is_never_a_target() -> None:
    assert plan(sqs_row("Hourglass-TimerQueue"))[-1] == "target.queue_url: is one of Hourglass's own queues"


def test_lambda_target_the_stack_does_not_allow_is_rejected() -> None:
    arn = "arn:aws:lambda:us-east-1:123456789012:function:billing"
    reason = plan({"queue": "orders", "body": 1, "target": {"type": "lambda", "function_arn": arn}})[-1]

    assert reason.startswith("target.function_arn: is not an allowed target")


def test_the_job_checks_rows_against_the_allow_lists_the_stack_sets_in_its_environment() -> None:
    args = schedule_job.parser().parse_args(["--input", "in.csv"])
    env = {contract.SQS_TARGETS: "payments"}
    stack = schedule_job.stack_settings(args, Deployment(table="t", timer_queue_url=TIMER_QUEUE), env)
    planner = Planner(QUEUES, NOW, "in.csv", stack=stack)

    assert planner.plan(1, json.dumps(sqs_row("payments")))[-1] is None
    assert str(planner.plan(2, json.dumps(sqs_row("target-orders")))[-1]).startswith("target.queue_url: is not")


def test_row_that_is_not_an_object_is_rejected() -> None:
    assert Planner(QUEUES, NOW, "x").plan(1, "[1]")[-1] == "row: must be a JSON object"


def test_expiry_before_due_time_plans_an_expired_message() -> None:
    planned = plan({"queue": "orders", "body": 1, "delay": 60, "ttl": 30})

    assert planned[3] == "expired"
    assert planned[5] is None


def test_csv_cells_keep_unparseable_values_as_text_for_validation() -> None:
    doc = json.loads(cells.document({"queue": "orders", "body": "{oops", "delay": "1e999", "ttl": "true"}))

    assert doc == {"queue": "orders", "body": "{oops", "delay": "1e999", "ttl": "true"}
    assert plan(doc)[-1] == "delay: must be a number"


def test_csv_numbers_and_json_bodies_are_typed() -> None:
    doc = json.loads(cells.document({"queue": "q", "body": '{"a": [1]}', "delay": "2.5", "dedup_id": "7"}))

    assert doc == {"queue": "q", "body": {"a": [1]}, "delay": 2.5, "dedup_id": "7"}


def test_a_row_keeps_its_flow_key_and_priority() -> None:
    doc = json.loads(cells.document({"queue": "orders", "body": "1", "flow_key": "tenant-7", "priority": "8"}))
    item = json.loads(str(plan(doc)[-2]))
    assert (item["flow_key"], item["priority"]) == ({"S": "tenant-7"}, {"N": "8"})


def test_a_row_with_a_priority_out_of_range_is_rejected_naming_it() -> None:
    reason = plan({"queue": "orders", "body": 1, "priority": 12})[-1]
    assert str(reason).startswith("priority")
