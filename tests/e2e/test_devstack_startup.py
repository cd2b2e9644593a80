"""`make dev` keeps its queues and messages across a restart (the emulator's state in a file), and
`--fresh` or HOURGLASS_STATE=off start empty; its start-up lines stay short and say where the state is."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hourglass_client import Client

from devstack import deploy
from devstack.__main__ import STATE_FILE, state_line, with_state
from devstack.config import RuntimeConfig
from devstack.emulator import free_port
from devstack.runtime import Runtime

API_KEY = "state-tests-key"


def started(config: RuntimeConfig) -> Runtime:
    runtime = Runtime(replace(config, api_port=0, emulator_port=free_port()))
    try:
        return runtime.start()
    except BaseException:
        runtime.stop()
        raise


def test_a_restart_keeps_queues_and_messages(tmp_path: Path) -> None:
    config = RuntimeConfig(api_key=API_KEY, state_file=tmp_path / "state" / "emulator.pickle")
    first = started(config)
    try:
        client = Client(first.api_url, API_KEY, timeout=60)
        client.put_queue("kept", target={"type": "http", "url": "http://127.0.0.1:9/hook"}, signing_secret="s")
        sent = client.send("kept", {"n": 1}, delay=3600)
    finally:
        first.stop()
    second = started(config)
    try:
        client = Client(second.api_url, API_KEY, timeout=60)
        assert client.get_queue("kept").raw["signing_secret_set"] is True
        assert client.get_message("kept", sent.id).status == "pending"
    finally:
        second.stop()


def test_fresh_forgets_the_saved_state(tmp_path: Path) -> None:
    saved = tmp_path / "emulator.pickle"
    saved.write_bytes(b"old")
    config = with_state(RuntimeConfig(state_file=saved), {"HOURGLASS_STATE": str(saved)}, fresh=True)
    assert (config.state_file, saved.exists()) == (saved, False)


@pytest.mark.parametrize(
    ("env", "endpoint", "expected"),
    [({}, None, STATE_FILE), ({"HOURGLASS_STATE": "off"}, None, None), ({}, "http://127.0.0.1:4566", None)],
)
def test_where_the_state_is_kept(env: dict[str, str], endpoint: str | None, expected: Path | None) -> None:
    assert with_state(RuntimeConfig(endpoint_url=endpoint), env, fresh=False).state_file == expected


def test_the_state_line_says_where_it_is_kept_and_how_to_start_empty(tmp_path: Path) -> None:
    kept = RuntimeConfig(state_file=tmp_path / "emulator.pickle")
    assert "make dev FRESH=1" in state_line(kept, fresh=False) and "emulator.pickle" in state_line(kept, fresh=False)
    assert "in memory only" in state_line(RuntimeConfig(), fresh=False)


class NoResources:
    """A CloudFormation client whose stack has no resource the emulator created."""

    def get_paginator(self, name: str) -> Any:
        return self

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return [{"StackResourceSummaries": []}]


def test_a_stack_left_without_its_table_stops_the_start_and_says_how_to_start_empty() -> None:
    template = {"Resources": {"Store": {"Type": "AWS::DynamoDB::Table"}}}
    with pytest.raises(deploy.DeployError, match="make dev FRESH=1"):
        deploy._warn_skipped(NoResources(), "Hourglass", template)


def test_the_emulators_stand_ins_are_reported_one_per_short_line(caplog: pytest.LogCaptureFixture) -> None:
    template = {"Resources": {f"R{n}": {"Type": kind} for n, kind in enumerate(deploy.STAND_INS)}}
    with caplog.at_level(logging.WARNING, logger=deploy.log.name):
        deploy._warn_skipped(NoResources(), "Hourglass", template)
    lines = caplog.records[0].getMessage().splitlines()
    assert len(lines) == 1 + len(deploy.STAND_INS)
    assert max(len(line) for line in lines) <= 120
