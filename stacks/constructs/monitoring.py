"""The operator's view of a deployed Hourglass: a CloudWatch dashboard, and alarms that page an SNS topic.

Message metrics come from the functions' EMF lines (namespace ``Hourglass``, the all-queues series
without dimensions); sweep figures from metric filters on the sweeper's JSON ``sweep`` log line.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnCondition, CfnParameter, Duration, Fn, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

NAMESPACE = "Hourglass"  # as in lambdas/hourglass/adapters/metrics.py
MESSAGE_FLOW = ("Scheduled", "Delivered", "Retried", "Failed", "Expired")
MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)


@dataclass(frozen=True, kw_only=True)
class AlarmThresholds:
    """When the alarms fire; each one is evaluated over `periods` five-minute periods unless noted."""

    failure_rate_percent: float = 5.0
    lateness_p99_ms: float = 60_000.0
    stuck_delivering: float = 1.0
    periods: int = 2


def hourglass_metric(name: str, statistic: str = "Sum", period: Duration = MINUTE) -> cw.Metric:
    return cw.Metric(namespace=NAMESPACE, metric_name=name, statistic=statistic, period=period)


class Monitoring(Construct):
    """Dashboard and alarms over the functions, the timer queue (and its DLQ) and Hourglass metrics.
    Alarms go to ``self.topic``; an email address (the ``AlarmEmail`` parameter, defaulting to
    ``alarm_email``) subscribes to it when not empty."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ingest: lambda_.Function,
        sweeper: lambda_.Function,
        dispatcher: lambda_.Function,
        timer_queue: sqs.IQueue,
        timer_dlq: sqs.IQueue,
        alarm_email: str | None = None,
        thresholds: AlarmThresholds | None = None,
        metric_math: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        limits = thresholds or AlarmThresholds()
        self.topic = sns.Topic(self, "AlarmTopic", display_name="Hourglass alarms")
        self._subscribe_email(alarm_email)
        sweep_out_of_time, sweep_claimed, sweep_incomplete = self._sweep_metrics(sweeper.log_group)

        flow = {name: hourglass_metric(name) for name in MESSAGE_FLOW}
        lateness = {stat: hourglass_metric("LatenessMs", stat) for stat in ("p50", "p99")}
        # Both counted when seen, not sampled (no cheap way to list `delivering` items): StuckDelivering when a
        # dispatcher takes over an attempt whose lease ran out, or the DLQ consumer fails one; DeadLetterTimers
        # for each timer the DLQ consumer reads, which empties the DLQ at once (its depth hardly shows one).
        stuck = hourglass_metric("StuckDelivering", "Maximum", FIVE_MINUTES)
        dead_letter_timers = hourglass_metric("DeadLetterTimers", "Sum", FIVE_MINUTES)
        dlq_depth = timer_dlq.metric_approximate_number_of_messages_visible(statistic="Maximum", period=MINUTE)
        queue_age = timer_queue.metric_approximate_age_of_oldest_message(statistic="Maximum", period=MINUTE)
        functions = {"ingest": ingest, "sweeper": sweeper, "dispatcher": dispatcher}

        once = (1.0, 1)  # any occurrence
        # name, description, metric, (threshold, evaluation periods), strictly above the threshold
        alarms: list[tuple[str, str, cw.IMetric, tuple[float, int], bool]] = [
            (
                "TimerDlqNotEmpty",
                "Timer messages reached the dead-letter queue: their messages were not handed to delivery",
                dlq_depth,
                once,
                False,
            ),
            (
                "StuckDelivering",
                "Messages stay in `delivering` past their lease (a dispatcher died or cannot finish)",
                stuck,
                (limits.stuck_delivering, 1),  # an event, seen once per stuck attempt, not a level held for periods
                False,
            ),
            (
                "CircuitBreakerTripped",
                "A queue's circuit breaker tripped: the queue paused itself (resume it once its target recovers)",
                hourglass_metric("CircuitBreakerTripped", "Sum", FIVE_MINUTES),
                once,  # an event per trip; the queue stays paused until resumed, so no level to hold
                False,
            ),
            (
                "TimersDeadLettered",
                "Timers were dead-lettered (counted by the DLQ consumer): their messages ended failed",
                dead_letter_timers,
                once,
                False,
            ),
        ]
        # Emulators without metric-math alarms (MiniStack 1.5) deploy with `-c hourglass:metric_math_alarms=false`.
        if metric_math:
            failure_rate = cw.MathExpression(
                expression="IF(delivered + failed > 0, 100 * failed / (delivered + failed), 0)",
                using_metrics={
                    "delivered": hourglass_metric("Delivered", period=FIVE_MINUTES),
                    "failed": hourglass_metric("Failed", period=FIVE_MINUTES),
                },
                period=FIVE_MINUTES,
                label="failed %",
            )
            alarms.append(
                (
                    "FailureRate",
                    f"More than {limits.failure_rate_percent}% of finished messages failed",
                    failure_rate,
                    (limits.failure_rate_percent, limits.periods),
                    True,
                )
            )
        alarms += [
            (
                "LatenessP99",
                f"p99 delivery lateness above {limits.lateness_p99_ms:.0f} ms",
                hourglass_metric("LatenessMs", "p99", FIVE_MINUTES),
                (limits.lateness_p99_ms, limits.periods),
                True,
            ),
            (
                "SweeperErrors",
                "The sweeper failed (invocation errors)",
                sweeper.metric_errors(statistic="Sum", period=FIVE_MINUTES),
                once,
                False,
            ),
            (
                "SweeperOutOfTime",
                "A sweep ran out of time before reaching its window's end (due messages wait for the next run)",
                sweep_out_of_time,
                once,
                False,
            ),
        ]
        self.alarms = [
            self._alarm(name, description, metric, threshold=threshold, periods=periods, strictly_above=above)
            for name, description, metric, (threshold, periods), above in alarms
        ]

        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            default_interval=Duration.hours(3),
            widgets=[
                [
                    cw.GraphWidget(title="Messages per minute", left=list(flow.values()), width=12, stacked=False),
                    cw.GraphWidget(
                        title="Delivery lateness (ms)",
                        left=list(lateness.values()),
                        left_annotations=[cw.HorizontalAnnotation(value=limits.lateness_p99_ms, label="p99 alarm")],
                        width=12,
                    ),
                ],
                [
                    cw.GraphWidget(title="Timer queue: oldest message age (s)", left=[queue_age], width=8),
                    cw.GraphWidget(
                        title="Timer DLQ depth, timers dead-lettered",
                        left=[dlq_depth],
                        right=[dead_letter_timers],
                        width=8,
                    ),
                    cw.GraphWidget(title="Stuck in delivering", left=[stuck], width=8),
                ],
                [
                    cw.GraphWidget(
                        title="Sweeper duration (ms)",
                        left=[
                            sweeper.metric_duration(statistic="Average", period=MINUTE),
                            sweeper.metric_duration(statistic="Maximum", period=MINUTE),
                        ],
                        width=8,
                    ),
                    cw.GraphWidget(
                        title="Sweep backlog: claimed per run, runs incomplete / out of time",
                        left=[sweep_claimed],
                        right=[sweep_incomplete, sweep_out_of_time],
                        width=8,
                    ),
                    cw.GraphWidget(
                        title="Lambda throttles",
                        left=[
                            fn.metric_throttles(statistic="Sum", period=MINUTE, label=name)
                            for name, fn in functions.items()
                        ],
                        width=8,
                    ),
                ],
            ],
        )

    def _subscribe_email(self, alarm_email: str | None) -> None:
        email = CfnParameter(
            self,
            "AlarmEmail",
            type="String",
            default=alarm_email or "",
            description="Email address subscribed to Hourglass alarms (empty: no subscription)",
        )
        # The parameter is found as "AlarmEmail" whatever the construct's path.
        email.override_logical_id("AlarmEmail")
        has_email = CfnCondition(
            self, "HasAlarmEmail", expression=Fn.condition_not(Fn.condition_equals(email.value_as_string, ""))
        )
        subscription = sns.CfnSubscription(
            self,
            "AlarmEmailSubscription",
            protocol="email",
            endpoint=email.value_as_string,
            topic_arn=self.topic.topic_arn,
        )
        subscription.cfn_options.condition = has_email

    def _sweep_metrics(self, log_group: logs.ILogGroup) -> tuple[cw.Metric, cw.Metric, cw.Metric]:
        """Metrics from each sweep's log line (hourglass.service.sweep logs one per run)."""

        def metric(name: str, pattern: str, value: str, statistic: str) -> cw.Metric:
            metric_filter = logs.MetricFilter(
                self,
                name,
                log_group=log_group,
                filter_pattern=logs.FilterPattern.literal(pattern),
                metric_namespace=NAMESPACE,
                metric_name=name,
                metric_value=value,
                default_value=0,
            )
            return metric_filter.metric(statistic=statistic, period=MINUTE)

        return (
            metric("SweepOutOfTime", '{ $.event = "sweep" && $.out_of_time IS TRUE }', "1", "Sum"),
            metric("SweepClaimed", '{ $.event = "sweep" }', "$.claimed", "Sum"),
            metric("SweepIncomplete", '{ $.event = "sweep" && $.complete IS FALSE }', "1", "Sum"),
        )

    def _alarm(
        self,
        name: str,
        description: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        periods: int,
        strictly_above: bool = False,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            name,
            alarm_description=f"Hourglass ({Stack.of(self).stack_name}): {description}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=(
                cw.ComparisonOperator.GREATER_THAN_THRESHOLD
                if strictly_above
                else cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
            ),
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm
