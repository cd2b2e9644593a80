"""Settings read from the environment, in this one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from hourglass.errors import ValidationError

MAX_TIMER_DELAY = 900


@dataclass(frozen=True)
class Settings:
    table: str
    timer_queue_url: str
    shards: int = 8
    lookahead: float = 300.0
    sweep_interval: float = 60.0
    retention_days: float = 7.0
    allow_private_callbacks: bool = False
    api_key: str | None = None
    bucket_seconds: int = 60
    handoff_safety: float = 30.0
    # How long a delivery attempt owns its message; must stay below the timer queue's visibility
    # timeout, so that a timer redelivered after a dispatcher died finds the lease over.
    delivery_lease: float = 120.0
    # Due entries one sweeper invocation claims within its time limit; a scheduled sweep that
    # expects more splits the shards among worker invocations (docs/capacity.md).
    sweep_capacity: int = 20_000
    # The function sweep workers are invoked as; unset, the sweeper invokes itself (its own name).
    sweeper_function: str | None = None
    # The S3 bucket of bodies too large for a body item (docs/design.md, "Message bodies"); unset,
    # such bodies cannot be stored.
    body_bucket: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        settings = cls(
            table=env.get("HOURGLASS_TABLE", ""),
            timer_queue_url=env.get("HOURGLASS_TIMER_QUEUE_URL", ""),
            shards=int(env.get("HOURGLASS_SHARDS", "8")),
            lookahead=float(env.get("HOURGLASS_LOOKAHEAD", "300")),
            sweep_interval=float(env.get("HOURGLASS_SWEEP_INTERVAL", "60")),
            retention_days=float(env.get("HOURGLASS_RETENTION_DAYS", "7")),
            allow_private_callbacks=env.get("HOURGLASS_ALLOW_PRIVATE_CALLBACKS", "0") == "1",
            api_key=env.get("HOURGLASS_API_KEY") or None,
            handoff_safety=float(env.get("HOURGLASS_HANDOFF_SAFETY", "30")),
            delivery_lease=float(env.get("HOURGLASS_DELIVERY_LEASE", "120")),
            sweep_capacity=int(env.get("HOURGLASS_SWEEP_CAPACITY", "20000")),
            sweeper_function=env.get("HOURGLASS_SWEEPER_FUNCTION") or None,
            body_bucket=env.get("HOURGLASS_BODY_BUCKET") or None,
        )
        settings.check()
        return settings

    def check(self) -> None:
        if not 0 < self.delivery_lease <= 3600:
            raise ValidationError("HOURGLASS_DELIVERY_LEASE", "must be between 0 and 3600 seconds")
        if self.sweep_capacity < 1:
            raise ValidationError("HOURGLASS_SWEEP_CAPACITY", "must be at least 1")
        if not 1 <= self.shards <= 1000:
            raise ValidationError("HOURGLASS_SHARDS", "must be between 1 and 1000")
        if not self.sweep_interval < self.lookahead <= MAX_TIMER_DELAY:
            raise ValidationError(
                "HOURGLASS_LOOKAHEAD",
                f"must be > HOURGLASS_SWEEP_INTERVAL ({self.sweep_interval:g}) and <= {MAX_TIMER_DELAY}",
            )
