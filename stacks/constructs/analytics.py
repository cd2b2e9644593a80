"""EMR Serverless for the PySpark pipeline: a Spark application, its bucket and its job execution role.

The bucket holds the job scripts (`code/`), inputs, reports (`reports/`), Spark logs (`logs/`) and
DynamoDB exports. What the role may do beyond this bucket is granted by the stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

EMR_SERVICE = "emr-serverless.amazonaws.com"
# Spark 3.5 and Python 3.9 on the workers; the jobs need 3.11, shipped as a venv archive (pipeline/README.md).
RELEASE_LABEL = "emr-7.5.0"
LOG_RETENTION = Duration.days(30)
# Explicit actions only: Spark reads, writes, overwrites and lists its outputs, with multipart uploads.
OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
]
BUCKET_ACTIONS = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]


@dataclass(frozen=True, kw_only=True)
class SparkCapacity:
    """Upper bound of the application's workers and when it stops when idle."""

    max_cpu: str = "32 vCPU"
    max_memory: str = "128 GB"
    idle_minutes: int = 15


class SparkAnalytics(Construct):
    """A SPARK EMR Serverless application, an encrypted private bucket and a role jobs run as."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        release_label: str = RELEASE_LABEL,
        capacity: SparkCapacity = SparkCapacity(),
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=removal_policy,
            lifecycle_rules=[s3.LifecycleRule(prefix="logs/", expiration=LOG_RETENTION)],
        )
        self.application = emrserverless.CfnApplication(
            self,
            "Application",
            release_label=release_label,
            type="SPARK",
            auto_start_configuration=emrserverless.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrserverless.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=capacity.idle_minutes
            ),
            maximum_capacity=emrserverless.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=capacity.max_cpu, memory=capacity.max_memory
            ),
        )
        # Only this application may assume the role (confused-deputy protection).
        self.job_role = iam.Role(
            self,
            "JobRole",
            description="Runs the Hourglass PySpark jobs on EMR Serverless",
            assumed_by=iam.ServicePrincipal(
                EMR_SERVICE,
                conditions={
                    "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                    "ArnEquals": {"aws:SourceArn": self.application.attr_arn},
                },
            ),
        )
        self.job_role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadWriteObjects", actions=OBJECT_ACTIONS, resources=[self.bucket.arn_for_objects("*")]
            )
        )
        self.job_role.add_to_policy(
            iam.PolicyStatement(sid="ListBucket", actions=BUCKET_ACTIONS, resources=[self.bucket.bucket_arn])
        )
