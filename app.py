"""CDK entry point: reads ``hourglass:*`` context values and synthesizes the Hourglass stack."""

from __future__ import annotations

import aws_cdk as cdk

from stacks.hourglass_stack import HourglassSettings, HourglassStack

STACK_ID = "Hourglass"
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


def settings_from_context(app: cdk.App) -> HourglassSettings:
    """Typed settings from ``-c hourglass:...`` / cdk.json values (CLI values arrive as strings)."""
    return HourglassSettings(
        shards=_int(app, "hourglass:shards", 8),
        lookahead_seconds=_int(app, "hourglass:lookahead", 300),
        retention_days=_int(app, "hourglass:retention_days", 7),
        allow_private_callbacks=_bool(app, "hourglass:allow_private_callbacks", False),
        sweep_interval_seconds=_int(app, "hourglass:sweep_interval", 60),
    )


def build(app: cdk.App) -> HourglassStack:
    return HourglassStack(app, STACK_ID, settings=settings_from_context(app))


def main() -> None:
    app = cdk.App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
