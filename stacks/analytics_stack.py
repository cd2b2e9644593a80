"""The optional analytics stack: EMR Serverless for the PySpark jobs, with only the access they need.

Deployed on request (``-c hourglass:analytics=true``). Given the table, its role may scan it for the
report; given the timer queue as well, it may also store bulk-scheduled messages and hand them off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.constructs.analytics import LOG_PREFIX, RELEASE_LABEL, SparkAnalytics, SparkCapacity

# The report scans; the scheduling job reads queue settings and checks which ids exist.
TABLE_READ_ACTIONS = ["dynamodb:Scan", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"]
TABLE_WRITE_ACTIONS = ["dynamodb:BatchWriteItem"]
TIMER_SEND_ACTIONS = ["sqs:SendMessage"]  # also authorizes SendMessageBatch
# The schedule job reads the due-index layout (shards, bucket, look-ahead) from the Hourglass stack's outputs.
LAYOUT_READ_ACTIONS = ["cloudformation:DescribeStacks"]


class AnalyticsStack(Stack):
    """The Spark application, its bucket and job role, and the role's grants on Hourglass."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable | None = None,
        timer_queue: sqs.IQueue | None = None,
        target_environment: Mapping[str, str] | None = None,
        layout_stack_name: str | None = None,
        release_label: str = RELEASE_LABEL,
        capacity: SparkCapacity = SparkCapacity(),
        **stack_props: Any,
    ) -> None:
        stack_props.setdefault("description", "Hourglass analytics: EMR Serverless for the PySpark pipeline")
        super().__init__(scope, construct_id, **stack_props)
        # The schedule job checks each row's target as the functions do, against the same variables.
        spark = SparkAnalytics(
            self, "Spark", release_label=release_label, capacity=capacity, driver_environment=target_environment
        )
        role = spark.job_role

        if table is not None:
            role.add_to_policy(
                iam.PolicyStatement(sid="ReadTable", actions=TABLE_READ_ACTIONS, resources=[table.table_arn])
            )
        if table is not None and timer_queue is not None:
            role.add_to_policy(
                iam.PolicyStatement(sid="WriteMessages", actions=TABLE_WRITE_ACTIONS, resources=[table.table_arn])
            )
            role.add_to_policy(
                iam.PolicyStatement(sid="HandOff", actions=TIMER_SEND_ACTIONS, resources=[timer_queue.queue_arn])
            )
        if table is not None and timer_queue is not None and layout_stack_name is not None:
            stack_arn = self.format_arn(
                service="cloudformation", resource="stack", resource_name=f"{layout_stack_name}/*"
            )
            role.add_to_policy(
                iam.PolicyStatement(sid="ReadLayout", actions=LAYOUT_READ_ACTIONS, resources=[stack_arn])
            )

        CfnOutput(self, "ApplicationId", value=spark.application.attr_application_id)
        CfnOutput(self, "JobRoleArn", value=role.role_arn)
        CfnOutput(self, "BucketName", value=spark.bucket.bucket_name)
        CfnOutput(self, "LogUri", value=spark.bucket.s3_url_for_object(LOG_PREFIX))
