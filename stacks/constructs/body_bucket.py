"""The S3 bucket of message bodies too large for a DynamoDB body item (claim check, docs/design.md).

Encrypted, private, TLS only, no fixed name; a lifecycle rule removes any body left behind once no
message can still need it (the longest delay plus retention); normally a body goes by the rule of
its `keep-days` tag, when its message's retention ends, or when its message is cancelled.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct
from hourglass import contract
from hourglass.core.body_placement import KEEP_DAYS_LADDER, KEEP_TAG

from stacks.constructs.private_bucket import private_bucket

# The API's horizon: no message is due more than ten years after it is created.
MAX_DELAY_DAYS = 3650
BODY_BUCKET_ENV = contract.BODY_BUCKET


class BodyBucket(Construct):
    """One bucket; the stack grants writers (ingest) and readers (dispatcher) through the methods below."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
        max_delay_days: int = MAX_DELAY_DAYS,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        if retention_days < 1 or max_delay_days < 1:
            raise ValueError("retention_days and max_delay_days must be >= 1")
        self.expire_after = Duration.days(max_delay_days + retention_days + 1)
        self.bucket = private_bucket(
            self,
            "Bucket",
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireLeftoverBodies",
                    expiration=self.expire_after,
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                # A body is tagged at PutObject with the days its message (retention included) needs.
                *(
                    s3.LifecycleRule(
                        id=f"Keep{days}Days", expiration=Duration.days(days), tag_filters={KEEP_TAG: str(days)}
                    )
                    for days in KEEP_DAYS_LADDER
                ),
            ],
            removal_policy=removal_policy,
        )

    def _grant(self, grantee: iam.IGrantable, sid: str, actions: list[str]) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(sid=sid, actions=actions, resources=[self.bucket.arn_for_objects("*")])
        )

    def grant_write(self, grantee: iam.IGrantable) -> None:
        """Put new bodies, read them (GET of a message) and delete replaced or cancelled ones (ingest)."""
        self._grant(
            grantee,
            "WriteMessageBodies",
            ["s3:PutObject", "s3:PutObjectTagging", "s3:GetObject", "s3:GetObjectTagging", "s3:DeleteObject"],
        )

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Read bodies to deliver them and keep them longer for a late retry (dispatcher)."""
        self._grant(
            grantee,
            "ReadMessageBodies",
            ["s3:GetObject", "s3:GetObjectTagging", "s3:PutObjectTagging"],
        )
