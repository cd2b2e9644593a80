"""The allowed-SQS-targets setting: ARNs, names and prefixes; never Hourglass's own queues."""

from __future__ import annotations

import pytest
from hourglass.core.sqs_targets import QueueRef, SqsTargetRule, queue_ref, refusal

ACCOUNT = "123456789012"
TIMER = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/Hourglass-TimerQueue-ABC"
DLQ = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/Hourglass-TimerDlq-XYZ"
RESERVED = (TIMER, DLQ)


def url(name: str, account: str = ACCOUNT) -> str:
    return f"https://sqs.us-east-1.amazonaws.com/{account}/{name}"


def test_an_empty_setting_allows_no_queue():
    assert refusal(url("orders"), SqsTargetRule.parse(""), reserved=RESERVED) is not None


def test_a_prefix_allows_the_names_it_starts_and_no_other():
    rule = SqsTargetRule.parse("orders-*")
    assert refusal(url("orders-eu"), rule, reserved=RESERVED) is None
    assert refusal(url("billing"), rule, reserved=RESERVED) is not None


def test_a_name_allows_that_queue_of_the_own_account_only():
    rule = SqsTargetRule.parse("orders")
    assert refusal(url("orders"), rule, reserved=RESERVED) is None
    assert refusal(url("orders-2"), rule, reserved=RESERVED) is not None
    assert refusal(url("orders", "999999999999"), rule, reserved=RESERVED) is not None


def test_an_arn_allows_a_queue_of_another_account():
    rule = SqsTargetRule.parse("arn:aws:sqs:eu-west-1:999999999999:shared.fifo, orders")
    assert refusal(url("shared.fifo", "999999999999"), rule, reserved=RESERVED) is None


@pytest.mark.parametrize("target", [TIMER, DLQ])
def test_the_timer_queue_and_its_dlq_are_never_allowed(target: str):
    assert "own queues" in (refusal(target, SqsTargetRule.parse("Hourglass-*"), reserved=RESERVED) or "")


@pytest.mark.parametrize("spec", ["*", "a b", "arn:aws:sqs:us-east-1:1:x", "orders*x", "arn:aws:sqs:*:123456789012:*"])
def test_a_setting_that_is_not_arns_names_or_prefixes_is_refused(spec: str):
    with pytest.raises(ValueError):
        SqsTargetRule.parse(spec)


def test_queue_ref_reads_local_and_aws_urls():
    assert queue_ref(f"http://127.0.0.1:4566/{ACCOUNT}/t") == QueueRef(ACCOUNT, "t")
    assert queue_ref("https://example.com/hook") is None


def test_a_lambda_with_a_malformed_setting_refuses_to_start():
    from hourglass.errors import ValidationError
    from hourglass.settings import Settings

    with pytest.raises(ValidationError) as info:
        Settings.from_env({"HOURGLASS_SQS_TARGETS": "orders-*,*"})
    assert info.value.field == "HOURGLASS_SQS_TARGETS"


def test_the_setting_reaches_the_lambda_settings():
    from hourglass.settings import Settings

    settings = Settings.from_env({"HOURGLASS_SQS_TARGETS": "orders-*", "HOURGLASS_TIMER_DLQ_URL": DLQ})
    assert (settings.sqs_targets, settings.timer_dlq_url) == ("orders-*", DLQ)
