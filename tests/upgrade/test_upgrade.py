"""`make test-upgrade`: the previous release tag deployed into MiniStack with its own `cdk deploy`, messages put in
flight (pending near and far, retrying, failed, paused, keyed under limits, cancelled by a bulk operation under way,
schedules every and cron) and kept coming while HEAD is deployed over the
same stack, and the rollback the other way round: nothing lost, early, duplicated or dead-lettered, the schedule
still fires; on HEAD, a held ordered key refuses the rollback until it is released (docs/upgrades.md)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
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
# The release `devstack.rollback` is asked about: the Makefile names v1.2.0 by its commit in a clone without tags.
PREVIOUS_RELEASE = PREVIOUS if PREVIOUS.startswith("v") else "v1.2.0"
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
    """Creates a message every 2 s while the next release is deployed: ingest of either release takes it. A
    create that fails or gets no answer is sent again with its dedup id, as the SDK does: MiniStack ends a function's
    worker when its code is updated, so a request in flight then gets a 502 or none (AWS lets it finish on the old
    code)."""

    def __init__(self, api: dict[str, Any]) -> None:
        super().__init__(name="upgrade-sender", daemon=True)
        self.api = api
        self.due: dict[str, float] = {}
        self.retried: list[Any] = []
        self.refused: list[Any] = []
        self.done = threading.Event()

    def run(self) -> None:
        for n in itertools.count():  # the first at once: a deploy from a cached synth may take only seconds
            self.create({"body": "during", "delay": 20, "dedup_id": f"during-{n}"})
            if self.done.wait(2):
                return

    def create(self, message: dict[str, Any]) -> None:
        for _ in range(5):
            try:
                status, doc = call(self.api, "POST", "/v1/queues/live/messages", {"messages": [message]})
            except OSError as exc:  # no answer in time (the function's code being replaced): it may have stored it
                status, doc = 0, repr(exc)
            if status == 201:
                self.due.update({m["id"]: epoch(m["due_at"]) for m in doc["messages"]})
                return
            self.retried.append((status, doc))
            time.sleep(1)
        self.refused.append(message)


def deploy_head(endpoint: str) -> dict[str, Any]:
    config = RuntimeConfig(endpoint_url=endpoint, sweep_interval=60, lookahead=LOOKAHEAD, allow_private_callbacks=True)
    head = DeployedStack(config).start()
    return {"api_url": head.api_url, "api_key": head.api_key, "outputs": head.outputs}


@dataclass
class Traffic:
    """Messages in every state the test puts in flight, by id and due time (epoch seconds)."""

    due: dict[str, float]
    far: dict[str, float]
    paused: dict[str, float]
    retrying: dict[str, float]
    failing: dict[str, float]
    bulk: dict[str, float]  # pending far ahead, cancelled by the operation started just before the deploy


BULK = 300


def put_traffic(api: dict[str, Any], receiver: CallbackReceiver) -> Traffic:
    queues = {
        "live": {},
        "held": {},
        "retry": {"retry": {"max_attempts": 6, "backoff_base": 15, "backoff_max": 30}},
        "fail": {"retry": {"max_attempts": 1}},
        "keyed": {"rate_limit": 5, "flow_control": {"key_rate_limit": 1, "key_max_concurrency": 1}},
        "bulk": {},
    }
    for queue, settings in queues.items():
        path = "/hook" if queue in ("live", "held", "keyed", "bulk") else f"/{queue}"
        body = {"target": {"type": "http", "url": receiver.url(path)}, **settings}
        assert call(api, "PUT", f"/v1/queues/{queue}", body)[0] == 201
    assert call(api, "POST", "/v1/queues/held/pause")[0] == 200
    assert call(api, "PUT", "/v1/queues/live/schedules/tick", {"every": 60, "body": "tick"})[0] == 201
    assert call(api, "PUT", "/v1/queues/live/schedules/cron", {"cron": "* * * * *", "body": "tick"})[0] == 201
    keyed = [{"body": {"k": n}, "delay": 35 + 5 * n, "flow_key": "ab"[n % 2], "priority": n % 10} for n in range(8)]
    bulk = [{"body": "bulk", "delay": 7200} for _ in range(BULK)]
    # Due while the next release is deployed and after: handed off by the first release's sweeps and
    # dispatched by either; one far ahead stays pending throughout.
    return Traffic(
        due={
            **created(api, "live", [{"body": {"n": n}, "delay": 30 + 30 * n} for n in range(12)]),
            **created(api, "keyed", keyed),
        },
        far=created(api, "live", [{"body": "far", "delay": 3600}]),
        paused=created(api, "held", [{"body": "paused", "delay": 30}]),
        retrying=created(api, "retry", [{"body": "retry", "delay": 40}, {"body": "retry", "delay": 70}]),
        failing=created(api, "fail", [{"body": "fail", "delay": 30}]),
        bulk={k: v for n in range(0, BULK, 100) for k, v in created(api, "bulk", bulk[n : n + 100]).items()},
    )


def start_cancel_all(api: dict[str, Any]) -> str:
    status, doc = call(api, "POST", "/v1/queues/bulk/operations", {"action": "cancel", "filter": {"status": "pending"}})
    assert status == 202, doc
    return str(doc["id"])


def finished_operation(api: dict[str, Any], operation: str) -> dict[str, Any]:
    deadline = time.time() + 120
    while True:
        doc: dict[str, Any] = call(api, "GET", f"/v1/queues/bulk/operations/{operation}")[1]
        if doc.get("status") != "running" or time.time() > deadline:
            return doc
        time.sleep(2)


def rollback_check(endpoint: str, *options: str) -> tuple[int, str]:
    """`python -m devstack.rollback --to <previous>` of HEAD, as a user rolling back runs it first."""
    env = {**os.environ, **DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run(
        [sys.executable, "-m", "devstack.rollback", "--to", PREVIOUS_RELEASE, *options],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def until(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, what
        time.sleep(1)


def held_key_refuses_rollback(api: dict[str, Any], receiver: CallbackReceiver, endpoint: str) -> list[str]:
    """On HEAD: an ordered queue whose key is held after a failure refuses the rollback to the previous release
    (which has no ordering); released and the queue's ordering removed, the rollback is allowed."""
    target = {"type": "http", "url": receiver.url("/ordered")}
    hold = {"target": target, "retry": {"max_attempts": 1}, "ordering": {"by": "flow_key", "on_failure": "hold"}}
    assert call(api, "PUT", "/v1/queues/ordered", hold)[0] == 201
    messages = [{"body": "first", "flow_key": "k", "delay": 2}, {"body": "second", "flow_key": "k", "delay": 3}]
    order = list(created(api, "ordered", messages))
    until(lambda: call(api, "GET", "/v1/queues/ordered/keys/k")[1].get("held"), "the key was never held")
    code, out = rollback_check(endpoint)
    assert (code, "'ordered'" in out) == (3, True), out
    assert call(api, "POST", "/v1/queues/ordered/keys/k/release")[0] == 200
    until(lambda: len(ids(receiver, "/ordered")) == 2, "the released key's next message never came")
    assert call(api, "PUT", "/v1/queues/ordered", {"target": target, "retry": {"max_attempts": 1}})[0] == 200
    # The bulk queue's 300 creates within a second widened their bucket: what an older sweeper reads, they move to.
    code, out = rollback_check(endpoint, "--rehome")
    assert code == 0, out
    return order


@pytest.mark.parametrize("direction", ["upgrade", "rollback"])
def test_a_release_deployed_over_another_loses_nothing(tmp_path: Path, direction: str) -> None:
    """upgrade: the previous release, then HEAD over it; rollback: HEAD, then the previous release over it."""
    receiver = CallbackReceiver(script={"/retry": [500] * 4, "/fail": [500] * 10, "/ordered": [500]}).start()
    emulator = MiniStack.start(free_port(), log_path=tmp_path / "ministack.log")
    try:
        old = checkout(PREVIOUS, tmp_path / "previous")
        deploys = [lambda: deploy_previous(old, emulator.endpoint_url), lambda: deploy_head(emulator.endpoint_url)]
        first_deploy, second_deploy = deploys if direction == "upgrade" else deploys[::-1]
        api = first_deploy()
        version = call(api, "GET", "/health")[1].get("version")
        traffic = put_traffic(api, receiver)

        if direction == "rollback":
            ordered = held_key_refuses_rollback(api, receiver, emulator.endpoint_url)
        operation = start_cancel_all(api)  # under way while the next release is deployed
        sender = Sender(api)
        sender.start()
        try:
            api = second_deploy()
        finally:
            sender.done.set()
            sender.join()
        deployed_at = time.time()
        if direction == "rollback":  # what HEAD's ingest placed beyond the base shards until it was replaced
            code, out = rollback_check(emulator.endpoint_url, "--rehome")
            assert code == 0, out
        assert call(api, "GET", "/health")[1].get("version") != version
        if direction == "upgrade":
            ordered = held_key_refuses_rollback(api, receiver, emulator.endpoint_url)
        due = {**traffic.due, **sender.due}

        deadline = max(due.values()) + 240
        while time.time() < deadline and not (
            set(due) <= set(ids(receiver, "/hook")) and len(ids(receiver, "/retry", 200)) == 2
        ):
            time.sleep(1)
        time.sleep(30)  # a duplicate would arrive by now
        got = ids(receiver, "/hook")
        first = {r.headers.get("Hourglass-Message-Id"): r.at for r in reversed(receiver.at("/hook"))}
        ticks = [r.at for r in receiver.at("/hook") if r.body == "tick"]
        sqs = boto3.client("sqs", endpoint_url=emulator.endpoint_url, region_name="us-east-1")
        dlq = sqs.get_queue_attributes(QueueUrl=api["outputs"]["TimerDlqUrl"], AttributeNames=["All"])["Attributes"]

        assert (sender.refused, len(sender.due) > 0) == ([], True), "ingest refused or took nothing during the deploy"
        assert {m: got[m] for m in due} == dict.fromkeys(due, 1), "lost or duplicated"
        assert [m for m in due if first[m] < due[m]] == [], "early"
        extra = set(got) - set(due)
        bodies = [r.body for r in receiver.at("/hook") if r.headers.get("Hourglass-Message-Id") in extra]
        assert extra == set(), f"delivered what was not due: {bodies}"
        retried = ids(receiver, "/retry", 200)
        assert retried == Counter(dict.fromkeys(traffic.retrying, 1)), "a retried message lost or doubled"
        assert ids(receiver, "/fail") == Counter(dict.fromkeys(traffic.failing, 1)), "a failed message attempted again"
        arrivals = [r.headers.get("Hourglass-Message-Id") for r in receiver.at("/ordered")]
        assert arrivals == ordered, "the held key's messages out of order, lost or doubled"
        statuses = [
            call(api, "GET", f"/v1/queues/{queue}/messages/{m}")[1]["status"]
            for queue, found in [
                ("live", traffic.far),
                ("held", traffic.paused),
                ("retry", traffic.retrying),
                ("fail", traffic.failing),
            ]
            for m in found
        ]
        assert statuses == ["pending", "pending", "delivered", "delivered", "failed"]
        assert any(at > deployed_at for at in ticks), "the schedules stopped firing"
        done = finished_operation(api, operation)
        assert (done["status"], done["applied"] + done["skipped"]) == ("succeeded", BULK), done
        cancelled = [call(api, "GET", f"/v1/queues/bulk/messages/{m}")[1]["status"] for m in traffic.bulk]
        assert Counter(cancelled) == Counter({"cancelled": BULK}), "the bulk operation left messages behind"
        counts = call(api, "GET", "/v1/queues/bulk")[1]["counts"]
        assert (counts["cancelled"], counts["pending"]) == (BULK, 0), f"counts off: {counts}"
        assert int(dlq["ApproximateNumberOfMessages"]) + int(dlq["ApproximateNumberOfMessagesNotVisible"]) == 0
    finally:
        emulator.stop()
        receiver.stop()
