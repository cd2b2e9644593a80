"""The Hourglass stack: composes table, timer queue, functions and API, and owns grants and wiring."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct
from hourglass import contract
from hourglass.core import aws_targets
from hourglass.version import __version__

from stacks.constructs.body_bucket import BODY_BUCKET_ENV, BodyBucket
from stacks.constructs.functions import DISPATCHER, INGEST, SWEEPER, Functions
from stacks.constructs.message_table import Capacity, MessageTable
from stacks.constructs.monitoring import Monitoring
from stacks.constructs.rest_api import IngestApi
from stacks.constructs.timer import TimerQueueWithDlq

LAMBDAS_DIR = Path(__file__).resolve().parents[1] / "lambdas"
# An SQS queue ARN, a queue name, or a non-empty name prefix ending in `*` (lambdas' core.sqs_targets).
SQS_TARGET = re.compile(
    r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?|[A-Za-z0-9_-]{1,80}(\.fifo)?|[A-Za-z0-9_-]{1,79}\*"
)

# SQS guidance for Lambda event sources: visibility timeout >= 6 x the function timeout.
VISIBILITY_TIMEOUT_FACTOR = 6
DISPATCH_BATCH_SIZE = 10
MAX_RECEIVE_COUNT = 10
_OFF = {"false", "0", "no", "off"}
# The functions' variables (besides those _grant_service_targets sets) that decide whether a target is allowed.
TARGET_SETTINGS = (contract.SQS_TARGETS, contract.TIMER_DLQ_URL, contract.ALLOW_PRIVATE_CALLBACKS)


@dataclass(frozen=True, kw_only=True)
class HourglassSettings:
    """Deploy-time settings; each becomes a ``HOURGLASS_*`` variable (see docs/design.md)."""

    shards: int = contract.DEFAULT_SHARDS
    lookahead_seconds: int = contract.DEFAULT_LOOKAHEAD
    retention_days: int = contract.DEFAULT_RETENTION_DAYS
    allow_private_callbacks: bool = False
    sweep_interval_seconds: int = contract.DEFAULT_SWEEP_INTERVAL
    # SQS queues messages may target: queue ARNs, queue names of this account, or `prefix*`.
    # Empty: no SQS targets (HTTP only). Granted exactly in IAM; never the timer queue or its DLQ.
    sqs_targets: tuple[str, ...] = ()
    # Lambda functions, SNS topics, EventBridge buses and Step Functions state machines messages may target
    # (`hourglass:<type>_targets`): ARNs or names of this account and region, `*` wildcards as IAM reads them.
    # Empty: none. Granted exactly in IAM; never a resource of this stack (core.aws_targets).
    lambda_targets: tuple[str, ...] = ()
    sns_targets: tuple[str, ...] = ()
    eventbridge_targets: tuple[str, ...] = ()
    stepfunctions_targets: tuple[str, ...] = ()
    # How API callers authenticate: "api_key", "iam" (SigV4) or "both" (contract.AUTH_MODES).
    auth: str = contract.AUTH_API_KEY
    # Whether lists may be ordered by creation (`order=created`): its index costs one write unit per message.
    order_created: bool = True
    # Whether lists may be ordered by due time (`order=due`): its index costs one write unit per message.
    order_due: bool = True
    # How the table is billed (`hourglass:capacity` and its min, max and target utilisation): docs/capacity.md.
    capacity: Capacity = field(default_factory=Capacity)
    # The dispatcher's event source's maximum concurrency (`hourglass:dispatch_concurrency`, 2-1,000): the most
    # timer batches processed at once; 1,000, the event source's own ceiling, by default (docs/capacity.md).
    dispatch_concurrency: int = 1_000

    def __post_init__(self) -> None:
        if not 2 <= self.dispatch_concurrency <= 1_000:
            raise ValueError(f"dispatch_concurrency must be 2-1000, got {self.dispatch_concurrency}")
        if self.auth not in contract.AUTH_MODES:
            raise ValueError(f"auth must be one of {', '.join(contract.AUTH_MODES)}, got {self.auth!r}")
        for kind in aws_targets.KINDS.values():
            try:
                aws_targets.ArnRule.parse(kind, ",".join(self.service_targets(kind)))
            except ValueError as exc:
                raise ValueError(f"{kind.setting}: {exc}") from exc
        for entry in self.sqs_targets:
            if not SQS_TARGET.fullmatch(entry):
                raise ValueError(
                    f"sqs_targets entry {entry!r} must be an SQS queue ARN, a queue name, or a name prefix ending in *"
                )
        if self.shards < 1:
            raise ValueError(f"shards must be >= 1, got {self.shards}")
        if self.lookahead_seconds < 0:
            raise ValueError(f"lookahead must be >= 0 seconds, got {self.lookahead_seconds}")
        if self.retention_days < 1:
            raise ValueError(f"retention_days must be >= 1, got {self.retention_days}")
        if self.sweep_interval_seconds < 1:
            raise ValueError(f"sweep_interval must be >= 1 second, got {self.sweep_interval_seconds}")

    @property
    def sweep_minutes(self) -> int:
        """EventBridge schedules have minute granularity: whole minutes, else every minute."""
        seconds = self.sweep_interval_seconds
        return seconds // 60 if seconds >= 60 and seconds % 60 == 0 else 1

    def service_targets(self, kind: aws_targets.Kind) -> tuple[str, ...]:
        return tuple(getattr(self, f"{kind.type}_targets"))

    def service_target_arns(self, stack: Stack, kind: aws_targets.Kind) -> list[str]:
        """The allow-list of `kind` as ARN patterns: names become ARNs of the stack's account and region (joins
        the functions read back as they are granted). Refuses an entry that could match the stack's own
        resources, all named `<stack name>-...` by CloudFormation."""
        entries = self.service_targets(kind)
        for entry in entries:
            if aws_targets.overlaps_stack(entry, kind, stack.stack_name):
                raise ValueError(f"{kind.setting} entry {entry!r} could match this stack's own resources")
        return [
            e if e.startswith("arn:") else stack.format_arn(service=kind.service, resource=kind.resource + e)
            for e in entries
        ]

    def sqs_target_arns(self, stack: Stack) -> list[str]:
        """The resources of the dispatcher's `sqs:SendMessage` to targets: exact ARNs, or `<prefix>*`."""
        return [e if e.startswith("arn:") else stack.format_arn(service="sqs", resource=e) for e in self.sqs_targets]

    def environment(self, *, table_name: str, timer_queue_url: str, timer_dlq_url: str) -> dict[str, str]:
        return {
            contract.TABLE: table_name,
            contract.TIMER_QUEUE_URL: timer_queue_url,
            contract.TIMER_DLQ_URL: timer_dlq_url,
            contract.SQS_TARGETS: ",".join(self.sqs_targets),
            contract.SHARDS: str(self.shards),
            contract.LOOKAHEAD: str(self.lookahead_seconds),
            contract.RETENTION_DAYS: str(self.retention_days),
            contract.ALLOW_PRIVATE_CALLBACKS: "1" if self.allow_private_callbacks else "0",
            contract.SWEEP_INTERVAL: str(self.sweep_minutes * 60),
            contract.ORDER_CREATED: "1" if self.order_created else "0",
            contract.ORDER_DUE: "1" if self.order_due else "0",
        }

    def layout_outputs(self) -> dict[str, str]:
        """The due-index layout and hand-off window the functions use, for jobs that write rows themselves."""
        return {
            contract.OUTPUT_SHARDS: str(self.shards),
            contract.OUTPUT_BUCKET_SECONDS: str(contract.DEFAULT_BUCKET_SECONDS),
            contract.OUTPUT_LOOKAHEAD: str(self.lookahead_seconds),
            contract.OUTPUT_HANDOFF_SAFETY: str(contract.DEFAULT_HANDOFF_SAFETY),
        }


class HourglassStack(Stack):
    """Everything Hourglass needs in one account and region."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: HourglassSettings,
        lambdas_dir: Path = LAMBDAS_DIR,
        **stack_props: Any,
    ) -> None:
        stack_props.setdefault("description", "Hourglass: serverless delay queue")
        super().__init__(scope, construct_id, **stack_props)

        store = MessageTable(
            self,
            "MessageStore",
            created_index=settings.order_created,
            due_list_index=settings.order_due,
            capacity=settings.capacity,
        )
        timer = TimerQueueWithDlq(
            self,
            "Timer",
            visibility_timeout=Duration.seconds(VISIBILITY_TIMEOUT_FACTOR * DISPATCHER.timeout.to_seconds()),
            max_receive_count=MAX_RECEIVE_COUNT,
        )
        # For stacks built on this one (the optional analytics stack).
        self.table = store.table
        self.timer_queue = timer.queue
        environment = settings.environment(
            table_name=store.table.table_name, timer_queue_url=timer.queue.queue_url, timer_dlq_url=timer.dlq.queue_url
        )
        # The construct id stays "Workers": another id would replace the deployed functions.
        functions = Functions(
            self,
            "Workers",
            code_dir=lambdas_dir,
            environment=environment,
            ingest=INGEST,
            sweeper=SWEEPER,
            dispatcher=DISPATCHER,
        )
        api = IngestApi(self, "Api", handler=functions.ingest, auth=settings.auth)
        # Bodies too large for a body item (docs/design.md, "Message bodies").
        bodies = BodyBucket(self, "Bodies", retention_days=settings.retention_days)
        # Every function may store a message version whose body goes there: ingest (POST, schedule PUT),
        # the dispatcher (a schedule's next occurrence, chained after an outcome) and the sweeper (the chain
        # repair; bulk operations that read stored bodies to admit them).
        for fn in (functions.ingest, functions.dispatcher, functions.sweeper):
            fn.add_environment(BODY_BUCKET_ENV, bodies.bucket.bucket_name)
            bodies.grant_write(fn)

        # Grants: every function reads/writes the table and sends timer messages
        # (ingest hands off, the sweeper hands off, the dispatcher re-sends early or retried ones).
        for fn in (functions.ingest, functions.sweeper, functions.dispatcher):
            store.table.grant_read_write_data(fn)
            timer.queue.grant_send_messages(fn)
        # The console's charts read the queue's metrics back (GetMetricData takes no resource ARNs).
        functions.ingest.add_to_role_policy(
            iam.PolicyStatement(sid="ReadQueueMetrics", actions=["cloudwatch:GetMetricData"], resources=["*"])
        )
        # The dispatcher delivers to the target queues the settings allow, and to no other; the sweeper
        # sends the failure notices a dispatcher left in the outbox, to the same queues.
        if settings.sqs_targets:
            for fn, sid in ((functions.dispatcher, "DeliverToTargetQueues"), (functions.sweeper, "SendLeftNotices")):
                fn.add_to_role_policy(
                    iam.PolicyStatement(sid=sid, actions=["sqs:SendMessage"], resources=settings.sqs_target_arns(self))
                )
        # What the functions check a target against, for jobs that admit messages themselves (the bulk loader).
        self.target_environment = {
            **{name: environment[name] for name in TARGET_SETTINGS},
            **self._grant_service_targets(settings, functions),
        }
        # A scheduled sweep with more due than one invocation can claim invokes the sweeper itself
        # (fan-out invocations; the statement id predates that name). A policy of its own: in the
        # role's default policy the function's ARN would make a dependency cycle (the function
        # depends on that policy).
        iam.Policy(
            self,
            "SweeperFanOut",
            roles=[functions.sweeper.role] if functions.sweeper.role else [],
            statements=[
                iam.PolicyStatement(
                    sid="InvokeSweepWorkers",
                    actions=["lambda:InvokeFunction"],
                    resources=[functions.sweeper.function_arn],
                )
            ],
        )
        # Ingest and the sweeper send packed timers: update the dispatcher that reads them first.
        for sender in (functions.ingest, functions.sweeper):
            sender.node.add_dependency(functions.dispatcher)

        # Wiring: the timer queue drives the dispatcher (the event source grants consumption),
        # a schedule drives the sweeper.
        functions.dispatcher.add_event_source(
            event_sources.SqsEventSource(
                timer.queue,
                batch_size=DISPATCH_BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=settings.dispatch_concurrency,
            )
        )
        # The timer DLQ drives it too: a dead-lettered timer's message ends failed with a reason
        # (service.dead_letters), never stays delivering.
        functions.dispatcher.add_event_source(
            event_sources.SqsEventSource(timer.dlq, batch_size=10, report_batch_item_failures=True)
        )
        events.Rule(
            self,
            "SweepSchedule",
            description="Runs the Hourglass sweeper",
            schedule=events.Schedule.rate(Duration.minutes(settings.sweep_minutes)),
            targets=[targets.LambdaFunction(functions.sweeper)],
        )

        # Dashboard and alarms; `-c hourglass:alarm_email=...` (or the AlarmEmail parameter) subscribes an address.
        monitoring = Monitoring(
            self,
            "Monitoring",
            ingest=functions.ingest,
            sweeper=functions.sweeper,
            dispatcher=functions.dispatcher,
            timer_queue=timer.queue,
            timer_dlq=timer.dlq,
            alarm_email=self.node.try_get_context("hourglass:alarm_email"),
            # `-c hourglass:metric_math_alarms=false`: for emulators without metric-math alarms (local deploys).
            metric_math=str(self.node.try_get_context("hourglass:metric_math_alarms")).lower() not in _OFF,
        )

        CfnOutput(self, "ApiUrl", value=api.url)
        CfnOutput(self, contract.OUTPUT_VERSION, value=__version__, description="the Hourglass release deployed")
        if api.api_key is not None:
            CfnOutput(self, contract.OUTPUT_API_KEY_ID, value=api.api_key.key_id)
        if api.invoke_policy is not None:
            CfnOutput(self, contract.OUTPUT_INVOKE_POLICY, value=api.invoke_policy.managed_policy_arn)
        CfnOutput(self, contract.OUTPUT_EXECUTE_ARN, value=api.execute_arn)
        CfnOutput(self, contract.OUTPUT_TABLE, value=store.table.table_name)
        CfnOutput(self, contract.OUTPUT_TIMER_QUEUE_URL, value=timer.queue.queue_url)
        CfnOutput(self, contract.OUTPUT_BODY_BUCKET, value=bodies.bucket.bucket_name)
        CfnOutput(self, "TimerDlqUrl", value=timer.dlq.queue_url)
        CfnOutput(self, contract.OUTPUT_INGEST_FUNCTION, value=functions.ingest.function_name)
        CfnOutput(self, "SweeperFunctionName", value=functions.sweeper.function_name)
        CfnOutput(self, "DispatcherFunctionName", value=functions.dispatcher.function_name)
        CfnOutput(self, "AlarmTopicArn", value=monitoring.topic.topic_arn)
        CfnOutput(self, "DashboardName", value=monitoring.dashboard.dashboard_name)
        for name, value in settings.layout_outputs().items():
            CfnOutput(self, name, value=value)

    def _grant_service_targets(self, settings: HourglassSettings, functions: Functions) -> dict[str, str]:
        """Every function learns the allow-lists (ingest checks them at create) and the stack's name (its own
        resources are never targets); the dispatcher delivers to exactly those resources, the sweeper sends
        the failure notices left in the outbox to them. Returns the variables it set."""
        workers = (functions.ingest, functions.sweeper, functions.dispatcher)
        allowed = {kind: settings.service_target_arns(self, kind) for kind in aws_targets.KINDS.values()}
        added = {contract.STACK_NAME: self.stack_name}
        added.update({contract.SERVICE_TARGETS[kind.type]: ",".join(arns) for kind, arns in allowed.items()})
        for fn in workers:
            for name, value in added.items():
                fn.add_environment(name, value)
        for kind, arns in allowed.items():
            if not arns:
                continue
            sid = kind.type.capitalize()
            for fn, role in ((functions.dispatcher, "DeliverTo"), (functions.sweeper, "NotifyTo")):
                statement = iam.PolicyStatement(sid=f"{role}{sid}Targets", actions=[kind.action], resources=arns)
                fn.add_to_role_policy(statement)
        return added
