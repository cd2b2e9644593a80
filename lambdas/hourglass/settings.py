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
        )
        settings.check()
        return settings

    def check(self) -> None:
        if not 1 <= self.shards <= 1000:
            raise ValidationError("HOURGLASS_SHARDS", "must be between 1 and 1000")
        if not self.sweep_interval < self.lookahead <= MAX_TIMER_DELAY:
            raise ValidationError(
                "HOURGLASS_LOOKAHEAD",
                f"must be > HOURGLASS_SWEEP_INTERVAL ({self.sweep_interval:g}) and <= {MAX_TIMER_DELAY}",
            )
