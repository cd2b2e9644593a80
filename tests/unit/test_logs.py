"""Log levels: one INFO line per message outcome, summaries at DEBUG, failures above INFO."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from hourglass.logs import log


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    log("configure", level=logging.DEBUG)  # the logger's own handler exists from here on
    logger = logging.getLogger("hourglass")
    saved = (logger.handlers, logger.level)
    handler = logging.StreamHandler(buffer)
    logger.handlers = [handler]
    logger.setLevel(logging.INFO)
    yield buffer
    logger.handlers, _ = saved
    logger.setLevel(saved[1])


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_message_outcome_is_one_info_line(out: io.StringIO) -> None:
    log("finished", id="m1", queue="q", status="delivered", attempts=1)
    assert lines(out) == [
        {"level": "INFO", "event": "finished", "id": "m1", "queue": "q", "status": "delivered", "attempts": 1}
    ]


def test_a_sweep_summary_is_not_written_at_info(out: io.StringIO) -> None:
    log("sweep", read=10, claimed=10)
    assert out.getvalue() == ""


def test_a_failure_is_a_warning(out: io.StringIO) -> None:
    log("dispatch_failed", id="m1", queue="q", error="boom")
    assert [line["level"] for line in lines(out)] == ["WARNING"]


def test_fields_without_a_value_are_left_out(out: io.StringIO) -> None:
    log("finished", id="m1", error=None)
    assert lines(out) == [{"level": "INFO", "event": "finished", "id": "m1"}]


def test_an_explicit_level_wins(out: io.StringIO) -> None:
    log("finished", logging.DEBUG, id="m1")
    assert out.getvalue() == ""


def test_events_of_the_command_line_tools_stay_at_info(out: io.StringIO) -> None:
    log("summary", rows=3)
    assert [line["level"] for line in lines(out)] == ["INFO"]
