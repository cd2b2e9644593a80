"""The monitoring construct in the synthesized stack: dashboard, alarms to SNS, email subscription."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from hourglass.adapters.metrics import Metrics

import app as hourglass_app

REPO_ROOT = Path(__file__).resolve().parents[2]


def synth(**context: object) -> Template:
    merged = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    merged.update(context)
    return Template.from_stack(hourglass_app.build(cdk.App(context=merged)))


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def alarm(template: Template, description: str) -> dict[str, Any]:
    found = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"AlarmDescription": Match.string_like_regexp(description)}}
    )
    assert len(found) == 1, sorted(found)
    return next(iter(found.values()))["Properties"]


def topic_ref(template: Template) -> dict[str, str]:
    topics = template.find_resources("AWS::SNS::Topic")
    assert len(topics) == 1
    return {"Ref": next(iter(topics))}


def test_every_alarm_notifies_the_topic_on_alarm_and_ok(template: Template) -> None:
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 8
    for resource in alarms.values():
        assert resource["Properties"]["AlarmActions"] == [topic_ref(template)]
        assert resource["Properties"]["OKActions"] == [topic_ref(template)]


def test_timer_dlq_alarm_fires_on_one_message(template: Template) -> None:
    props = alarm(template, "dead-letter queue")
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    dlqs = template.find_resources("AWS::SQS::Queue", {"Properties": {"MessageRetentionPeriod": 14 * 24 * 3600}})
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [next(iter(dlqs)), "QueueName"]}}]


def test_stuck_delivering_alarm_reads_the_agreed_metric(template: Template) -> None:
    props = alarm(template, "delivering")
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == ("Hourglass", "StuckDelivering", "Maximum")
    # counted once per stuck attempt (at its takeover): one 5-minute period that saw one is enough
    assert (props["EvaluationPeriods"], props["Threshold"]) == (1, 1)


def test_circuit_breaker_alarm_fires_on_one_trip(template: Template) -> None:
    props = alarm(template, "circuit breaker tripped")
    metric = (props["Namespace"], props["MetricName"], props["Statistic"])
    assert metric == ("Hourglass", "CircuitBreakerTripped", "Sum")
    assert (props["Threshold"], props["EvaluationPeriods"], props["ComparisonOperator"]) == (
        1,
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert props["TreatMissingData"] == "notBreaching"


def test_dead_lettered_timers_alarm_reads_the_dlq_consumers_count(template: Template) -> None:
    props = alarm(template, "Timers were dead-lettered")
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == ("Hourglass", "DeadLetterTimers", "Sum")
    assert (props["Threshold"], props["EvaluationPeriods"], props["ComparisonOperator"]) == (
        1,
        1,
        "GreaterThanOrEqualToThreshold",
    )


def test_failure_rate_alarm_divides_failed_by_finished(template: Template) -> None:
    props = alarm(template, "finished messages failed")
    expression = next(m for m in props["Metrics"] if "Expression" in m)
    assert "failed / (delivered + failed)" in expression["Expression"]
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
    assert names == {"Delivered", "Failed"}
    assert (props["Threshold"], props["ComparisonOperator"]) == (5, "GreaterThanThreshold")


def test_lateness_alarm_uses_p99(template: Template) -> None:
    props = alarm(template, "p99 delivery lateness")
    assert (props["MetricName"], props["ExtendedStatistic"], props["Threshold"]) == ("LatenessMs", "p99", 60000)


def test_sweeper_errors_alarm_watches_the_sweeper_function(template: Template) -> None:
    props = alarm(template, "sweeper failed")
    sweeper = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "hourglass.handlers.sweeper.handler"}}
    )
    assert props["MetricName"] == "Errors"
    assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": next(iter(sweeper))}}]


def test_out_of_time_sweeps_are_counted_from_the_sweep_log_line(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Logs::MetricFilter",
        {
            "FilterPattern": '{ $.event = "sweep" && $.out_of_time IS TRUE }',
            "MetricTransformations": [
                Match.object_like({"MetricNamespace": "Hourglass", "MetricName": "SweepOutOfTime", "MetricValue": "1"})
            ],
        },
    )
    assert alarm(template, "ran out of time")["MetricName"] == "SweepOutOfTime"


def test_dashboard_shows_flow_lateness_queues_sweeper_and_throttles(template: Template) -> None:
    dashboards = template.find_resources("AWS::CloudWatch::Dashboard")
    assert len(dashboards) == 1
    body = json.dumps(next(iter(dashboards.values()))["Properties"]["DashboardBody"])
    for needle in (
        "Scheduled", "Delivered", "Retried", "Failed", "Expired", "LatenessMs", "p50", "p99",
        "ApproximateAgeOfOldestMessage", "ApproximateNumberOfMessagesVisible", "Duration", "SweepClaimed",
        "Throttles", "StuckDelivering", "DeadLetterTimers",
    ):  # fmt: skip
        assert needle in body, needle


def test_email_subscription_only_when_an_address_is_given(template: Template) -> None:
    template.has_parameter("AlarmEmail", {"Type": "String", "Default": ""})
    subscription = template.find_resources("AWS::SNS::Subscription", {"Properties": {"Protocol": "email"}})
    assert len(subscription) == 1
    resource = next(iter(subscription.values()))
    assert resource["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}
    condition = template.to_json()["Conditions"][resource["Condition"]]
    assert condition == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}


def test_alarm_email_context_becomes_the_parameter_default() -> None:
    synth(**{"hourglass:alarm_email": "ops@example.com"}).has_parameter("AlarmEmail", {"Default": "ops@example.com"})


def test_the_functions_emit_the_all_queues_series_the_alarms_read() -> None:
    stream = StringIO()
    metrics = Metrics(stream=stream)
    metrics.count("Failed", queue="orders")
    metrics.flush()
    directive = json.loads(stream.getvalue())["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Hourglass"
    assert [] in directive["Dimensions"] and ["Queue"] in directive["Dimensions"]


def test_metric_math_alarms_off_leaves_out_only_the_failure_rate_alarm(template: Template) -> None:
    local = synth(**{"hourglass:metric_math_alarms": "false"})
    descriptions = {
        r["Properties"]["AlarmDescription"] for r in local.find_resources("AWS::CloudWatch::Alarm").values()
    }
    everything = {
        r["Properties"]["AlarmDescription"] for r in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    [left_out] = everything - descriptions
    assert left_out.endswith("of finished messages failed")
