"""CDK entry point: reads ``hourglass:*`` context values and synthesizes the Hourglass stack."""

from __future__ import annotations

import aws_cdk as cdk

from stacks.analytics_stack import AnalyticsStack
from stacks.constructs.message_table import Capacity
from stacks.hourglass_stack import HourglassSettings, HourglassStack

STACK_ID = "Hourglass"
# The contract's defaults (hourglass.contract), as the stack's settings hold them.
DEFAULTS = HourglassSettings()
ANALYTICS_STACK_ID = "HourglassAnalytics"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _int(app: cdk.App, key: str, default: int) -> int:
    value = app.node.try_get_context(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"context {key!r} must be an integer, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"context {key!r} must be an integer, got {value!r}") from None


def _bool(app: cdk.App, key: str, default: bool) -> bool:
    value = app.node.try_get_context(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"context {key!r} must be a boolean, got {value!r}")


def _list(app: cdk.App, key: str) -> tuple[str, ...]:
    """A list from cdk.json, or a comma-separated string from `-c key=a,b`."""
    value = app.node.try_get_context(key)
    if value is None:
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def settings_from_context(app: cdk.App) -> HourglassSettings:
    """Typed settings from ``-c hourglass:...`` / cdk.json values (CLI values arrive as strings)."""
    return HourglassSettings(
        shards=_int(app, "hourglass:shards", DEFAULTS.shards),
        lookahead_seconds=_int(app, "hourglass:lookahead", DEFAULTS.lookahead_seconds),
        retention_days=_int(app, "hourglass:retention_days", DEFAULTS.retention_days),
        allow_private_callbacks=_bool(app, "hourglass:allow_private_callbacks", DEFAULTS.allow_private_callbacks),
        sweep_interval_seconds=_int(app, "hourglass:sweep_interval", DEFAULTS.sweep_interval_seconds),
        sqs_targets=_list(app, "hourglass:sqs_targets"),
        lambda_targets=_list(app, "hourglass:lambda_targets"),
        sns_targets=_list(app, "hourglass:sns_targets"),
        eventbridge_targets=_list(app, "hourglass:eventbridge_targets"),
        stepfunctions_targets=_list(app, "hourglass:stepfunctions_targets"),
        auth=str(app.node.try_get_context("hourglass:auth") or DEFAULTS.auth).strip().lower(),
        order_created=_bool(app, "hourglass:order_created", DEFAULTS.order_created),
        order_due=_bool(app, "hourglass:order_due", DEFAULTS.order_due),
        capacity=Capacity(
            mode=str(app.node.try_get_context("hourglass:capacity") or DEFAULTS.capacity.mode).strip().lower(),
            min_units=_int(app, "hourglass:capacity_min", DEFAULTS.capacity.min_units),
            max_units=_int(app, "hourglass:capacity_max", DEFAULTS.capacity.max_units),
            target_percent=_int(app, "hourglass:capacity_target", DEFAULTS.capacity.target_percent),
            warm_writes=_int(app, "hourglass:warm_writes", DEFAULTS.capacity.warm_writes),
            warm_reads=_int(app, "hourglass:warm_reads", DEFAULTS.capacity.warm_reads),
        ),
        dispatch_concurrency=_int(app, "hourglass:dispatch_concurrency", DEFAULTS.dispatch_concurrency),
    )


def build(app: cdk.App) -> HourglassStack:
    stack = HourglassStack(app, STACK_ID, settings=settings_from_context(app))
    # EMR Serverless for the PySpark pipeline, only on request; scheduling (write) access on a second request.
    if _bool(app, "hourglass:analytics", False):
        schedules = _bool(app, "hourglass:analytics_schedule", False)
        AnalyticsStack(
            app,
            ANALYTICS_STACK_ID,
            table=stack.table,
            timer_queue=stack.timer_queue if schedules else None,
            target_environment=stack.target_environment if schedules else None,
            layout_stack_name=stack.stack_name if schedules else None,
        )
    return stack


def main() -> None:
    app = cdk.App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
