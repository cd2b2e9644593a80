"""The project's S3 bucket baseline: S3-managed encryption, public access blocked, TLS only, no fixed name."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_s3 as s3
from constructs import Construct


def private_bucket(scope: Construct, construct_id: str, **props: Any) -> s3.Bucket:
    """A bucket with the baseline and `props` (lifecycle rules, removal policy, ownership)."""
    return s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        **props,
    )
