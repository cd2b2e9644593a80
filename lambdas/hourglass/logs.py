"""Structured JSON logs: one line per event, with message id and queue, never payloads or secrets.

At INFO a Lambda writes one line per message outcome; failures are warnings or errors; the rest
(per-run summaries) is DEBUG. CloudWatch Logs bills every byte.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

_logger = logging.getLogger("hourglass")

# The Lambdas' events and their levels; an event not listed here (the CLI tools') is INFO.
LEVELS = {
    "finished": logging.INFO,
    "retry_scheduled": logging.INFO,
    "sweep": logging.DEBUG,
    "taken_over": logging.WARNING,
    "poison_timer": logging.WARNING,
    "dispatch_failed": logging.WARNING,
    "handoff_fallback": logging.WARNING,
    "release_failed": logging.WARNING,
    "sweep_worker_not_started": logging.WARNING,
    "dependency_failed": logging.ERROR,
    "request_failed": logging.ERROR,
    "unhandled_error": logging.ERROR,
}


def _configure() -> None:
    if _logger.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)
    _logger.setLevel(os.environ.get("HOURGLASS_LOG_LEVEL", "INFO").upper())
    _logger.propagate = False


def level_of(event: str) -> int:
    return LEVELS.get(event, logging.INFO)


def log(event: str, level: int | None = None, **fields: Any) -> None:
    """One JSON line; fields that are None are left out. `level` defaults to the event's (LEVELS)."""
    _configure()
    level = level_of(event) if level is None else level
    if _logger.isEnabledFor(level):
        record = {"level": logging.getLevelName(level), "event": event}
        record.update((k, v) for k, v in fields.items() if v is not None)
        _logger.log(level, json.dumps(record, default=str, separators=(",", ":")))
