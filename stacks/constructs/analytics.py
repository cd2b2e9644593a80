"""EMR Serverless for the PySpark pipeline: a Spark application, its bucket and its job execution role.

The bucket holds the job scripts (`code/`), inputs, reports (`reports/`), Spark logs (`logs/`) and
DynamoDB exports. What the role may do beyond this bucket is granted by the stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.constructs.private_bucket import private_bucket

EMR_SERVICE = "emr-serverless.amazonaws.com"
# Spark 4, as the local PySpark 4 the tests run. The jobs bring their own Python 3.11+ with boto3
# and matplotlib (`make emr-package`'s pyenv.tar.gz, built on Amazon Linux 2023 for x86_64).
RELEASE_LABEL = "emr-spark-8.0.0"
ARCHITECTURE = "X86_64"
LOG_RETENTION = Duration.days(30)
LOG_PREFIX = "logs/"
# Explicit actions only: Spark reads, writes, overwrites and lists its outputs, with multipart uploads.
OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
]
BUCKET_ACTIONS = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]
# A variable every job's driver gets: spark-defaults property prefix.
DRIVER_ENV = "spark.emr-serverless.driverEnv."


@dataclass(frozen=True, kw_only=True)
class SparkCapacity:
    """Upper bound of the application's workers, when it stops when idle, and each job's default sizing.

    The sizing fits in the bound: one driver and `max_executors` executors. The schedule job shares
    its --max-write-units among max_executors x executor_cores concurrent write tasks.
    """

    max_cpu: str = "32 vCPU"
    max_memory: str = "128 GB"
    idle_minutes: int = 15
    driver_cores: int = 2
    driver_memory: str = "6g"
    executor_cores: int = 4
    executor_memory: str = "12g"
    initial_executors: int = 2
    max_executors: int = 6

    def spark_defaults(self) -> dict[str, str]:
        return {
            "spark.driver.cores": str(self.driver_cores),
            "spark.driver.memory": self.driver_memory,
            "spark.executor.cores": str(self.executor_cores),
            "spark.executor.memory": self.executor_memory,
            "spark.executor.instances": str(self.initial_executors),
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.maxExecutors": str(self.max_executors),
            "spark.sql.session.timeZone": "UTC",
        }


class SparkAnalytics(Construct):
    """A SPARK EMR Serverless application, an encrypted private bucket and a role jobs run as."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        release_label: str = RELEASE_LABEL,
        capacity: SparkCapacity = SparkCapacity(),
        driver_environment: Mapping[str, str] | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        """`driver_environment`: variables every job's driver gets (empty values are left out: unset reads the same)."""
        super().__init__(scope, construct_id)
        defaults = capacity.spark_defaults()
        defaults.update({DRIVER_ENV + name: value for name, value in (driver_environment or {}).items() if value})
        self.bucket = private_bucket(
            self,
            "Bucket",
            removal_policy=removal_policy,
            lifecycle_rules=[s3.LifecycleRule(prefix="logs/", expiration=LOG_RETENTION)],
        )
        self.application = emrserverless.CfnApplication(
            self,
            "Application",
            release_label=release_label,
            type="SPARK",
            architecture=ARCHITECTURE,
            # Every job's driver and executor logs go to the bucket (also kept by EMR for the console).
            monitoring_configuration=emrserverless.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emrserverless.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=self.bucket.s3_url_for_object(LOG_PREFIX)
                ),
                managed_persistence_monitoring_configuration=(
                    emrserverless.CfnApplication.ManagedPersistenceMonitoringConfigurationProperty(enabled=True)
                ),
            ),
            runtime_configuration=[
                emrserverless.CfnApplication.ConfigurationObjectProperty(
                    classification="spark-defaults", properties=defaults
                )
            ],
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
