"""Structured JSON logs: one line per event, with message id and queue, never payloads or secrets."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

_logger = logging.getLogger("hourglass")


def _configure() -> None:
    if _logger.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)
    if _logger.level == logging.NOTSET:
        _logger.setLevel(logging.INFO)
    _logger.propagate = False


def set_level(level: str) -> None:
    """The least severe level logged (settings.log_level); INFO until set."""
    _logger.setLevel(level.upper())


def log(event: str, level: int = logging.INFO, **fields: Any) -> None:
    _configure()
    if _logger.isEnabledFor(level):
        record = {"level": logging.getLevelName(level), "event": event, **fields}
        _logger.log(level, json.dumps(record, default=str, separators=(",", ":")))
