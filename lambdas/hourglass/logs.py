"""Structured JSON logs: one line per event, with message id and queue, never payloads or secrets."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

_logger = logging.getLogger("hourglass")


def _configure() -> None:
    if _logger.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)
    _logger.setLevel(os.environ.get("HOURGLASS_LOG_LEVEL", "INFO").upper())
    _logger.propagate = False


def log(event: str, level: int = logging.INFO, **fields: Any) -> None:
    _configure()
    if _logger.isEnabledFor(level):
        record = {"level": logging.getLevelName(level), "event": event, **fields}
        _logger.log(level, json.dumps(record, default=str, separators=(",", ":")))
