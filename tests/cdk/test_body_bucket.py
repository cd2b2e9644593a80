"""The body bucket in the synthesized stack: private, encrypted, TLS only, expiring leftovers,
least-privilege grants, its name in the functions that use it."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from stacks.constructs.body_bucket import MAX_DELAY_DAYS, BodyBucket
from tests.cdk.test_stack import function, synth

RETENTION_DAYS = 7  # cdk.json's default


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def statements(template: Template, sid: str) -> list[dict[str, Any]]:
    found = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        found += [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == sid]
    return found


def test_there_is_one_bucket(template: Template) -> None:
    template.resource_count_is("AWS::S3::Bucket", 1)


def test_the_bucket_has_no_fixed_name(template: Template) -> None:
    template.has_resource_properties("AWS::S3::Bucket", {"BucketName": Match.absent()})


def test_the_bucket_is_encrypted(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            }
        },
    )


def test_public_access_is_blocked(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }
        },
    )


def test_requests_without_tls_are_denied(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    )


def test_leftover_bodies_expire_after_the_longest_delay_plus_retention(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "ExpirationInDays": MAX_DELAY_DAYS + RETENTION_DAYS + 1,
                                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                                "Status": "Enabled",
                            }
                        )
                    ]
                )
            }
        },
    )


def test_a_body_tagged_to_keep_nine_days_expires_after_nine_days(template: Template) -> None:
    rule = {"ExpirationInDays": 9, "TagFilters": [{"Key": "keep-days", "Value": "9"}], "Status": "Enabled"}
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {"LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like(rule)])}},
    )


def test_the_bucket_is_retained(template: Template) -> None:
    template.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Retain"})


HANDLERS = (
    "hourglass.handlers.api.handler",
    "hourglass.handlers.dispatcher.handler",
    "hourglass.handlers.sweeper.handler",
)


def test_every_function_knows_the_bucket(template: Template) -> None:
    # Each may store a message version whose body goes to S3 (a schedule occurrence: at PUT, when chained
    # by the dispatcher, when repaired by the sweeper).
    (bucket_id,) = template.find_resources("AWS::S3::Bucket")
    for handler in HANDLERS:
        _, fn = function(template, handler)
        assert fn["Properties"]["Environment"]["Variables"]["HOURGLASS_BODY_BUCKET"] == {"Ref": bucket_id}


def test_each_function_may_put_get_tag_and_delete_bodies_only(template: Template) -> None:
    found = statements(template, "WriteMessageBodies")
    assert len(found) == len(HANDLERS)
    for statement in found:
        assert sorted(statement["Action"]) == [
            "s3:DeleteObject",
            "s3:GetObject",
            "s3:GetObjectTagging",
            "s3:PutObject",
            "s3:PutObjectTagging",
        ]


def test_grants_cover_the_bucket_objects_only(template: Template) -> None:
    (bucket_id,) = template.find_resources("AWS::S3::Bucket")
    for statement in statements(template, "WriteMessageBodies"):
        assert statement["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]}


def test_the_construct_refuses_a_retention_below_a_day() -> None:
    with pytest.raises(ValueError):
        BodyBucket(cdk.Stack(cdk.App(), "S"), "Bodies", retention_days=0)


