"""`make test-upgrade`: the previous release tag deployed into MiniStack with its own `cdk deploy`, messages put in
flight (pending near and far, retrying, failed, paused, a schedule) and kept coming while HEAD is deployed over the
same stack: nothing lost, early, duplicated or dead-lettered, the schedule still fires (docs/upgrades.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from devstack import api_call
from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.emulator import DUMMY_CREDENTIALS, free_port
from devstack.ministack import MiniStack
from tests.loopback import CallbackReceiver

PREVIOUS = os.environ.get("HOURGLASS_UPGRADE_FROM", "")
pytestmark = pytest.mark.skipif(not PREVIOUS, reason="deploys two releases into MiniStack: make test-upgrade")
ROOT = Path(__file__).resolve().parents[2]
LOOKAHEAD = 65
# The previous release deploys itself with its own devstack (its code, its synth, its CDK app), into our emulator.
DEPLOY_PREVIOUS = """
import json, sys
from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
config = RuntimeConfig(endpoint_url=sys.argv[1], sweep_interval=60, lookahead=float(sys.argv[2]),
                       allow_private_callbacks=True)
stack = DeployedStack(config).start()
print("DEPLOYED " + json.dumps({"api_url": stack.api_url, "api_key": stack.api_key, "outputs": stack.outputs}))
"""


def checkout(tag: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", tag], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for tool in ("node_modules", ".venv-ministack"):
        (into / tool).symlink_to(ROOT / tool)
    return into


def deploy_previous(old: Path, endpoint: str) -> dict[str, Any]:
    env = {**os.environ, **DUMMY_CREDENTIALS, "PYTHONPATH": f"{old / 'lambdas'}{os.pathsep}{old}"}
    result = subprocess.run(
        [sys.executable, "-c", DEPLOY_PREVIOUS, endpoint, str(LOOKAHEAD)],
        cwd=old,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("DEPLOYED ")]
    assert result.returncode == 0 and lines, (result.stdout + result.stderr)[-3000:]
    return dict(json.loads(lines[-1].removeprefix("DEPLOYED ")))


def call(api: dict[str, Any], method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return api_call.call(api["api_url"], method, path, body, api_key=api["api_key"])


def created(api: dict[str, Any], queue: str, messages: list[dict[str, Any]]) -> dict[str, float]:
    status, doc = call(api, "POST", f"/v1/queues/{queue}/messages", {"messages": messages})
    assert status == 201, doc
    return {m["id"]: epoch(m["due_at"]) for m in doc["messages"]}


def epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def ids(receiver: CallbackReceiver, path: str, answered: int | None = None) -> Counter[str | None]:
    return Counter(
        r.headers.get("Hourglass-Message-Id")
        for r in receiver.at(path)
        if r.body != "tick" and (answered is None or r.answered == answered)
    )


class Sender(threading.Thread):
    """Creates a message every few seconds while HEAD is being deployed: ingest of either release takes it."""

    def __init__(self, api: dict[str, Any]) -> None:
        super().__init__(name="upgrade-sender", daemon=True)
        self.api = api
        self.due: dict[str, float] = {}
        self.refused: list[Any] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(5):
            status, doc = call(
                self.api, "POST", "/v1/queues/live/messages", {"messages": [{"body": "during", "delay": 20}]}
            )
            if status == 201:
                self.due.update({m["id"]: epoch(m["due_at"]) for m in doc["messages"]})
            else:
                self.refused.append((status, doc))


def test_head_deployed_over_the_previous_release_loses_nothing(tmp_path: Path) -> None:
    receiver = CallbackReceiver(script={"/retry": [500] * 4, "/fail": [500] * 10}).start()
    emulator = MiniStack.start(free_port(), log_path=tmp_path / "ministack.log")
    try:
        old = checkout(PREVIOUS, tmp_path / "previous")
        api = deploy_previous(old, emulator.endpoint_url)
        version = call(api, "GET", "/health")[1].get("version")
        queues = {
            "live": {},
            "held": {},
            "retry": {"retry": {"max_attempts": 6, "backoff_base": 15, "backoff_max": 30}},
            "fail": {"retry": {"max_attempts": 1}},
        }
        for queue, settings in queues.items():
            path = "/hook" if queue in ("live", "held") else f"/{queue}"
            body = {"target": {"type": "http", "url": receiver.url(path)}, **settings}
            assert call(api, "PUT", f"/v1/queues/{queue}", body)[0] == 201
        assert call(api, "POST", "/v1/queues/held/pause")[0] == 200
        # Due while HEAD is deployed and after: handed off by the previous release's sweeps and dispatched
        # by either release; one far ahead stays pending throughout.
        due = created(api, "live", [{"body": {"n": n}, "delay": 30 + 30 * n} for n in range(12)])
        far = created(api, "live", [{"body": "far", "delay": 3600}])
        paused = created(api, "held", [{"body": "paused", "delay": 30}])
        retrying = created(api, "retry", [{"body": "retry", "delay": 40}, {"body": "retry", "delay": 70}])
        failing = created(api, "fail", [{"body": "fail", "delay": 30}])
        assert call(api, "PUT", "/v1/queues/live/schedules/tick", {"every": 60, "body": "tick"})[0] == 201

        sender = Sender(api)
        sender.start()
        try:
            head = DeployedStack(
                RuntimeConfig(
                    endpoint_url=emulator.endpoint_url,
                    sweep_interval=60,
                    lookahead=LOOKAHEAD,
                    allow_private_callbacks=True,
                )
            ).start()
        finally:
            sender.done.set()
            sender.join()
        deployed_at = time.time()
        api = {"api_url": head.api_url, "api_key": head.api_key}
        assert call(api, "GET", "/health")[1]["version"] != version
        due.update(sender.due)

        deadline = max(due.values()) + 240
        while time.time() < deadline and not (
            set(due) <= set(ids(receiver, "/hook")) and len(ids(receiver, "/retry", 200)) == 2
        ):
            time.sleep(1)
        time.sleep(30)  # a duplicate would arrive by now
        got = ids(receiver, "/hook")
        first = {r.headers.get("Hourglass-Message-Id"): r.at for r in reversed(receiver.at("/hook"))}
        ticks = [r.at for r in receiver.at("/hook") if r.body == "tick"]
        dlq = boto3.client("sqs", endpoint_url=emulator.endpoint_url, region_name="us-east-1")
        dead = dlq.get_queue_attributes(QueueUrl=head.outputs["TimerDlqUrl"], AttributeNames=["All"])["Attributes"]

        assert (sender.refused, len(sender.due) > 0) == ([], True), "ingest refused or took nothing during the deploy"
        assert {m: got[m] for m in due} == dict.fromkeys(due, 1), "lost or duplicated"
        assert [m for m in due if first[m] < due[m]] == [], "early"
        assert set(got) - set(due) == set(), "delivered what was not due"
        assert ids(receiver, "/retry", 200) == Counter(dict.fromkeys(retrying, 1)), "a retried message lost or doubled"
        assert ids(receiver, "/fail") == Counter(dict.fromkeys(failing, 1)), "a failed message attempted again"
        statuses = [
            call(api, "GET", f"/v1/queues/{q}/messages/{m}")[1]["status"]
            for q, found in [("live", far), ("held", paused), ("retry", retrying), ("fail", failing)]
            for m in found
        ]
        assert statuses == ["pending", "pending", "delivered", "delivered", "failed"]
        assert any(at > deployed_at for at in ticks), "the schedule stopped firing"
        assert int(dead["ApproximateNumberOfMessages"]) + int(dead["ApproximateNumberOfMessagesNotVisible"]) == 0
    finally:
        emulator.stop()
        receiver.stop()
