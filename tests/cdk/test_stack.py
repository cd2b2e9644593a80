"""Synthesized template of the Hourglass stack: storage, queues, functions, API, schedule, IAM."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

import app as hourglass_app

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLERS = {
    "hourglass.handlers.api.handler": (29, 512),
    "hourglass.handlers.sweeper.handler": (60, 512),
    "hourglass.handlers.dispatcher.handler": (180, 256),
}
ENV_KEYS = [
    "HOURGLASS_TABLE",
    "HOURGLASS_TIMER_QUEUE_URL",
    "HOURGLASS_SHARDS",
    "HOURGLASS_LOOKAHEAD",
    "HOURGLASS_RETENTION_DAYS",
    "HOURGLASS_ALLOW_PRIVATE_CALLBACKS",
    "HOURGLASS_SQS_TARGETS",
    "HOURGLASS_TIMER_DLQ_URL",
]


def synth(**context: object) -> Template:
    """Template of the app as the CDK CLI would build it (cdk.json context + ``context``)."""
    merged = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    merged.update(context)
    app = cdk.App(context=merged)
    return Template.from_stack(hourglass_app.build(app))


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def only(resources: Mapping[str, Any]) -> tuple[str, Any]:
    assert len(resources) == 1, sorted(resources)
    return next(iter(resources.items()))


def function(template: Template, handler: str) -> tuple[str, Any]:
    return only(template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}}))


def environments(template: Template) -> list[dict[str, Any]]:
    functions = template.find_resources("AWS::Lambda::Function")
    return [fn["Properties"]["Environment"]["Variables"] for fn in functions.values()]


# ----------------------------------------------------------------------------------- table


def test_table_key_schema(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with([{"AttributeName": "pk", "AttributeType": "S"}]),
        },
    )


def test_table_is_on_demand(template: Template) -> None:
    template.has_resource_properties("AWS::DynamoDB::Table", {"BillingMode": "PAY_PER_REQUEST"})


def test_table_has_point_in_time_recovery(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}},
    )


def test_table_ttl_attribute_is_expire_at(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": {"AttributeName": "expire_at", "Enabled": True}},
    )


def test_table_is_encrypted(template: Template) -> None:
    template.has_resource_properties("AWS::DynamoDB::Table", {"SSESpecification": {"SSEEnabled": True}})


def test_table_is_retained(template: Template) -> None:
    template.has_resource("AWS::DynamoDB::Table", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})


def test_due_index_keys_and_projection(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    {
                        "IndexName": "due",
                        "KeySchema": [
                            {"AttributeName": "sweep_pk", "KeyType": "HASH"},
                            {"AttributeName": "sweep_sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": ["version", "flow_key", "priority"],
                        },
                    }
                ]
            ),
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": "sweep_pk", "AttributeType": "S"},
                    {"AttributeName": "sweep_sk", "AttributeType": "S"},
                ]
            ),
        },
    )


def test_list_indexes_are_keys_only(template: Template) -> None:
    """The list orders' indexes (v1.2) project keys only, so a status change never writes them."""
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    {
                        "IndexName": "list",
                        "KeySchema": [
                            {"AttributeName": "list_pk", "KeyType": "HASH"},
                            {"AttributeName": "list_sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    },
                    {
                        "IndexName": "created",
                        "KeySchema": [
                            {"AttributeName": "list_pk", "KeyType": "HASH"},
                            {"AttributeName": "created_at", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    },
                ]
            ),
            "AttributeDefinitions": Match.array_with([{"AttributeName": "created_at", "AttributeType": "N"}]),
        },
    )


@pytest.mark.parametrize(
    ("order", "index", "sort", "kept"),
    [("created", "created", "created_at", "list"), ("due", "list", "list_sk", "created")],
)
def test_an_order_switched_off_drops_its_index(order: str, index: str, sort: str, kept: str) -> None:
    """`hourglass:order_<order>` false: the table has no index for it (a 400), one write unit less per message."""
    off = synth(**{f"hourglass:order_{order}": "false"})
    off.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.not_(Match.array_with([Match.object_like({"IndexName": index})])),
            "AttributeDefinitions": Match.not_(Match.array_with([Match.object_like({"AttributeName": sort})])),
        },
    )
    off.has_resource_properties(
        "AWS::DynamoDB::Table", {"GlobalSecondaryIndexes": Match.array_with([Match.object_like({"IndexName": kept})])}
    )
    assert {variables[f"HOURGLASS_ORDER_{order.upper()}"] for variables in environments(off)} == {"0"}


def test_without_either_list_order_the_table_keeps_only_the_due_index() -> None:
    off = synth(**{"hourglass:order_due": "false", "hourglass:order_created": "false"})
    off.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"GlobalSecondaryIndexes": [Match.object_like({"IndexName": "due"})]},
    )


def test_the_created_index_is_kept_by_default(template: Template) -> None:
    assert {variables["HOURGLASS_ORDER_CREATED"] for variables in environments(template)} == {"1"}


# ---------------------------------------------------------------------------------- queues


def test_timer_queue_redrives_to_the_dlq_after_ten_receives(template: Template) -> None:
    dlq_id, _ = only(
        template.find_resources("AWS::SQS::Queue", {"Properties": {"MessageRetentionPeriod": 14 * 24 * 3600}})
    )
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "RedrivePolicy": {
                "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
                "maxReceiveCount": 10,
            }
        },
    )


def test_timer_queue_visibility_covers_six_dispatcher_timeouts(template: Template) -> None:
    _, dispatcher = function(template, "hourglass.handlers.dispatcher.handler")
    _, queue = only(template.find_resources("AWS::SQS::Queue", {"Properties": {"RedrivePolicy": Match.any_value()}}))
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * dispatcher["Properties"]["Timeout"]


def test_queues_use_sqs_managed_encryption(template: Template) -> None:
    queues = template.find_resources("AWS::SQS::Queue")
    assert len(queues) == 2
    assert all(q["Properties"].get("SqsManagedSseEnabled") is True for q in queues.values())


# ------------------------------------------------------------------------------- functions


@pytest.mark.parametrize("handler", sorted(HANDLERS))
def test_function_runtime_and_sizing(template: Template, handler: str) -> None:
    timeout, memory = HANDLERS[handler]
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": handler, "Runtime": "python3.12", "Timeout": timeout, "MemorySize": memory},
    )


def test_functions_have_no_layers(template: Template) -> None:
    functions = template.find_resources("AWS::Lambda::Function")
    assert len(functions) == 3
    assert all("Layers" not in fn["Properties"] for fn in functions.values())


def test_functions_share_one_code_asset(template: Template) -> None:
    functions = template.find_resources("AWS::Lambda::Function")
    keys = {json.dumps(fn["Properties"]["Code"], sort_keys=True) for fn in functions.values()}
    assert len(keys) == 1


def test_functions_carry_the_settings_environment(template: Template) -> None:
    for variables in environments(template):
        assert set(ENV_KEYS) <= set(variables)


def test_default_settings_reach_the_environment(template: Template) -> None:
    for variables in environments(template):
        assert variables["HOURGLASS_SHARDS"] == "8"
        assert variables["HOURGLASS_LOOKAHEAD"] == "300"
        assert variables["HOURGLASS_RETENTION_DAYS"] == "7"
        assert variables["HOURGLASS_ALLOW_PRIVATE_CALLBACKS"] == "0"


def test_function_logs_are_kept_one_month(template: Template) -> None:
    template.resource_count_is("AWS::Logs::LogGroup", 3)
    template.all_resources_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})


def test_dispatcher_consumes_timer_queue_with_partial_batch_failures(template: Template) -> None:
    dispatcher_id, _ = function(template, "hourglass.handlers.dispatcher.handler")
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": dispatcher_id},
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_sweeper_runs_every_minute(template: Template) -> None:
    sweeper_id, _ = function(template, "hourglass.handlers.sweeper.handler")
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [sweeper_id, "Arn"]}})],
        },
    )


# ------------------------------------------------------------------------------------- IAM


def _statements(template: Template) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy")
    assert policies
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_no_policy_statement_grants_a_wildcard_action(template: Template) -> None:
    for statement in _statements(template):
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            assert "*" not in action, statement


def _resolved(value: Any) -> str:
    """A resource as text: joins joined, references as placeholders, so a `*` inside a join shows."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_resolved(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return "{" + str(value["Ref"]) + "}"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "{" + ".".join(value["Fn::GetAtt"]) + "}"
    return json.dumps(value)


def _resources(statement: dict[str, Any]) -> list[str]:
    resources = statement["Resource"]
    return [_resolved(r) for r in (resources if isinstance(resources, list) else [resources])]


def test_resolved_sees_a_wildcard_inside_a_join() -> None:
    joined = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sqs:us-east-1:", {"Ref": "AWS::AccountId"}, ":*"]]}
    assert _resolved(joined) == "arn:{AWS::Partition}:sqs:us-east-1:{AWS::AccountId}:*"


def _wildcards(template: Template) -> list[str]:
    """Resources with a `*`, except the indexes of the stack's own table (`{Table.Arn}/index/*`) and the
    objects of its own body bucket (`{BodiesBucket….Arn}/*`)."""
    own = re.compile(r"\{[A-Za-z0-9]+\.Arn\}/index/\*|\{BodiesBucket[A-Za-z0-9]*\.Arn\}/\*")
    # cloudwatch:GetMetricData takes no resource ARN: its statement (the console's charts) can only name `*`.
    scoped = [s for s in _statements(template) if s.get("Action") != "cloudwatch:GetMetricData"]
    resources = [r for s in scoped for r in _resources(s)]
    return [r for r in resources if "*" in r and not own.fullmatch(r)]


def test_no_policy_statement_grants_a_wildcard_resource(template: Template) -> None:
    assert _wildcards(template) == []


def test_a_prefix_is_granted_as_prefix_star_and_nothing_wider() -> None:
    granted = _wildcards(synth(**{"hourglass:sqs_targets": "orders-*"}))
    # Granted twice: the dispatcher delivers there, the sweeper sends the failure notices left in the outbox.
    assert granted == ["arn:{AWS::Partition}:sqs:{AWS::Region}:{AWS::AccountId}:orders-*"] * 2


def _role_actions(template: Template, handler: str) -> set[str]:
    _, fn = function(template, handler)
    role = {"Ref": fn["Properties"]["Role"]["Fn::GetAtt"][0]}
    policies = template.find_resources("AWS::IAM::Policy").values()
    statements = [
        s for p in policies if role in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def test_only_the_dispatcher_consumes_the_timer_queue(template: Template) -> None:
    consuming = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
    by_role = {handler: _role_actions(template, handler) & consuming for handler in HANDLERS}
    assert by_role == {
        "hourglass.handlers.api.handler": set(),
        "hourglass.handlers.sweeper.handler": set(),
        "hourglass.handlers.dispatcher.handler": consuming,
    }


def test_no_function_may_manage_tables_or_queues(template: Template) -> None:
    managing = (
        "dynamodb:CreateTable",
        "dynamodb:DeleteTable",
        "dynamodb:UpdateTable",
        "sqs:DeleteQueue",
        "sqs:PurgeQueue",
        "sqs:SetQueueAttributes",
        "sqs:CreateQueue",
        "iam:",
    )
    actions = set().union(*(_role_actions(template, handler) for handler in HANDLERS))
    assert [a for a in actions if a.startswith(managing)] == []


def _target_statements(template: Template) -> list[dict[str, Any]]:
    return [s for s in _statements(template) if s.get("Sid") == "DeliverToTargetQueues"]


def test_by_default_the_dispatcher_may_send_to_no_target_queue(template: Template) -> None:
    assert _target_statements(template) == []
    assert {v["HOURGLASS_SQS_TARGETS"] for v in environments(template)} == {""}


def test_the_dispatcher_may_send_exactly_to_the_configured_targets() -> None:
    arn = "arn:aws:sqs:eu-west-1:999999999999:shared.fifo"
    template = synth(**{"hourglass:sqs_targets": f"orders-*,billing,{arn}"})
    [statement] = _target_statements(template)
    assert statement["Action"] == "sqs:SendMessage"
    assert sorted(_resources(statement)) == sorted(
        [
            "arn:{AWS::Partition}:sqs:{AWS::Region}:{AWS::AccountId}:orders-*",
            "arn:{AWS::Partition}:sqs:{AWS::Region}:{AWS::AccountId}:billing",
            arn,
        ]
    )
    assert {v["HOURGLASS_SQS_TARGETS"] for v in environments(template)} == {f"orders-*,billing,{arn}"}


@pytest.mark.parametrize("entry", ["*", "orders*x", "arn:aws:sqs:*:123456789012:*", "a b"])
def test_a_target_setting_with_a_wildcard_or_junk_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        synth(**{"hourglass:sqs_targets": entry})


# ------------------------------------------------------------------------------------- API


def test_api_methods_require_an_api_key(template: Template) -> None:
    methods = template.find_resources("AWS::ApiGateway::Method")
    assert len(methods) >= 2  # root ANY and {proxy+} ANY
    # Only the console's static page is public (tests/cdk/test_console_route.py).
    resources = template.find_resources("AWS::ApiGateway::Resource")
    console = [{"Ref": k} for k, r in resources.items() if r["Properties"]["PathPart"] in ("console", "{asset}")]
    keyed = [m for m in methods.values() if m["Properties"].get("ResourceId") not in console]
    assert len(keyed) == len(methods) - 2
    assert all(m["Properties"]["ApiKeyRequired"] is True for m in keyed)


def test_api_proxies_every_path_to_ingest(template: Template) -> None:
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})


def test_api_stage_is_prod(template: Template) -> None:
    template.has_resource_properties("AWS::ApiGateway::Stage", {"StageName": "prod"})


def test_usage_plan_throttles_each_key(template: Template) -> None:
    template.has_resource_properties(
        "AWS::ApiGateway::UsagePlan",
        {
            "Throttle": {"RateLimit": 100, "BurstLimit": 200},
            "ApiStages": [Match.object_like({"Stage": Match.any_value()})],
        },
    )


def test_api_key_is_on_the_usage_plan(template: Template) -> None:
    template.resource_count_is("AWS::ApiGateway::ApiKey", 1)
    template.resource_count_is("AWS::ApiGateway::UsagePlanKey", 1)


def test_no_api_gateway_cloudwatch_account_role(template: Template) -> None:
    template.resource_count_is("AWS::ApiGateway::Account", 0)


# ------------------------------------------------------------------------ outputs and names


def test_outputs(template: Template) -> None:
    outputs = template.find_outputs("*")
    assert {
        "ApiUrl",
        "ApiKeyId",
        "TableName",
        "TimerQueueUrl",
        "TimerDlqUrl",
        "IngestFunctionName",
        "SweeperFunctionName",
        "DispatcherFunctionName",
    } <= set(outputs)


@pytest.mark.parametrize(
    ("resource_type", "name_property"),
    [
        ("AWS::DynamoDB::Table", "TableName"),
        ("AWS::SQS::Queue", "QueueName"),
        ("AWS::Lambda::Function", "FunctionName"),
        ("AWS::Logs::LogGroup", "LogGroupName"),
        ("AWS::IAM::Role", "RoleName"),
        ("AWS::Events::Rule", "Name"),
    ],
)
def test_no_fixed_physical_names(template: Template, resource_type: str, name_property: str) -> None:
    resources = template.find_resources(resource_type)
    assert resources
    assert all(name_property not in r["Properties"] for r in resources.values())


# ------------------------------------------------------------------------- context → props


def test_lookahead_comes_from_context() -> None:
    variables = environments(synth(**{"hourglass:lookahead": 120}))
    assert [v["HOURGLASS_LOOKAHEAD"] for v in variables] == ["120"] * 3


def test_cli_string_context_values_are_parsed() -> None:
    variables = environments(synth(**{"hourglass:shards": "16", "hourglass:allow_private_callbacks": "true"}))
    assert {(v["HOURGLASS_SHARDS"], v["HOURGLASS_ALLOW_PRIVATE_CALLBACKS"]) for v in variables} == {("16", "1")}


@pytest.mark.parametrize(("seconds", "expression"), [(120, "rate(2 minutes)"), (90, "rate(1 minute)")])
def test_sweep_interval_becomes_whole_minutes(seconds: int, expression: str) -> None:
    synth(**{"hourglass:sweep_interval": seconds}).has_resource_properties(
        "AWS::Events::Rule", {"ScheduleExpression": expression}
    )


def test_invalid_context_is_rejected() -> None:
    with pytest.raises(ValueError, match="hourglass:shards"):
        synth(**{"hourglass:shards": "many"})


def test_metrics_are_read_back_by_one_statement(template: Template) -> None:
    readers = [s for s in _statements(template) if s.get("Action") == "cloudwatch:GetMetricData"]
    assert [(s["Sid"], s["Resource"]) for s in readers] == [("ReadQueueMetrics", "*")]
