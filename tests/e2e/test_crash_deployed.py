"""The deployed dispatcher killed mid-batch (the crash switch, HOURGLASS_CRASH_AT) in each phase of an attempt: every
message of the batch it was working on arrives, none twice but the documented takeover (docs/guarantees.md,
"Crash recovery"); the lateness is printed."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hourglass import contract
from hourglass.service import crash_switch

from devstack.deployed import CACHE
from tests.e2e.conftest import MODES, Client, Receiver, Stack
from tests.e2e.test_delivery import due_epoch, http_queue, post

pytestmark = pytest.mark.skipif("deployed" not in MODES, reason="the deployed stack: make test-deployed")

MESSAGES = 12
# How long after the last due time the test waits: the 120 s budget and a margin (the test is about delivery).
WAIT = 180.0
# The marked message's attempts that reach the receiver, by the phase its first attempt died in: after its
# begin it is taken over at its lease's end (attempt 2), and after its delivery too (the documented takeover).
MARKED_ATTEMPTS = {"received": ["1"], "begun": ["2"], "delivered": ["1", "2"]}


def dispatcher(stack: Stack) -> str:
    """The function the timer queue's event source mapping drives."""
    sqs, lam = stack.client("sqs"), stack.client("lambda")
    queue = stack.outputs[contract.OUTPUT_TIMER_QUEUE_URL]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    [mapping] = lam.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
    return str(mapping["FunctionArn"])


def set_environment(stack: Stack, function: str, variables: dict[str, str]) -> None:
    lam = stack.client("lambda")
    lam.update_function_configuration(FunctionName=function, Environment={"Variables": variables})
    deadline = time.time() + 60
    while lam.get_function_configuration(FunctionName=function).get("LastUpdateStatus") not in (None, "Successful"):
        assert time.time() < deadline, "the dispatcher's configuration update did not finish"
        time.sleep(0.5)


def emulator_log(stack: Stack) -> Path:
    """MiniStack's output (devstack.deployed), where a Lambda process that died left its last lines: the
    platform writes a failed invocation's output nowhere else (not to CloudWatch Logs)."""
    log = CACHE / f"ministack-{urlsplit(stack.endpoint_url).port}.log"
    assert log.exists(), f"{log} is missing: the deployed stack's MiniStack is not the fixture's own"
    return log


@dataclass
class Crash:
    """The dispatcher dies (its process exits) at `phase` of a marked message's first attempt, until disarmed."""

    stack: Stack
    phase: str
    function: str
    variables: dict[str, Any]
    log: Path
    # Where the emulator's log stood when the switch was armed.
    offset: int

    def fired(self, timeout: float) -> None:
        """Until the switch's line is in the log."""
        line = f'"event":"crash_switch","phase":"{self.phase}"'
        deadline = time.time() + timeout
        while line not in self.log.read_bytes()[self.offset :].decode(errors="replace"):
            assert time.time() < deadline, f"the crash switch did not fire at {self.phase} within {timeout:.0f} s"
            time.sleep(0.5)

    def disarm(self) -> None:
        set_environment(self.stack, self.function, self.variables)


@pytest.fixture(params=contract.CRASH_PHASES)
def crashing(request: pytest.FixtureRequest, stack: Stack) -> Iterator[Crash]:
    if stack.mode != "deployed":
        pytest.skip("the crash switch of a deployed dispatcher (the local runtime's: make bench, crash)")
    function = dispatcher(stack)
    lam = stack.client("lambda")
    variables: dict[str, Any] = lam.get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    log = emulator_log(stack)
    offset = log.stat().st_size
    set_environment(stack, function, {**variables, contract.CRASH_AT: request.param})
    try:
        yield Crash(stack, request.param, function, variables, log, offset)
    finally:
        set_environment(stack, function, variables)


def arrived(receiver: Receiver, path: str) -> list[str]:
    """The message ids of the requests the receiver got at `path`, one per request, in order."""
    return [request.headers["Hourglass-Message-Id"] for request in receiver.at(path)]


def wait_until(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.time() + seconds
    while not done() and time.time() < deadline:
        time.sleep(0.2)


def test_messages_whose_dispatcher_died_mid_batch_arrive_once_but_the_takeover(
    api: Client, receiver: Receiver, stack: Stack, crashing: Crash
) -> None:
    path = f"/crashed-{crashing.phase}"
    queue = http_queue(api, receiver, path)
    # One POST: the batch-mates' timers travel with the marked one's, which is due first.
    bodies = [{crash_switch.MARK: True}] + [{"n": n} for n in range(1, MESSAGES)]
    created = post(api, queue, *({"body": body, "delay": 3 + (n > 0) * (1 + n % 3)} for n, body in enumerate(bodies)))
    due = {m["id"]: due_epoch(m) for m in created}
    marked = created[0]["id"]
    crashing.fired(timeout=due[marked] - time.time() + 30)
    if crashing.phase == "received":
        # The marked message's next attempt is still its first: it must find the switch off. It comes back after
        # the hold (30 s); the switch goes off once its batch-mates' invocations are done, as a configuration update
        # restarts the function's processes (MiniStack fails the invocations it restarts them under).
        wait_until(lambda: set(due) - {marked} <= set(arrived(receiver, path)), 20)
        crashing.disarm()
    wanted = len(MARKED_ATTEMPTS[crashing.phase])
    ids = lambda: arrived(receiver, path)  # noqa: E731
    wait_until(lambda: set(due) <= set(ids()) and ids().count(marked) >= wanted, max(due.values()) + WAIT - time.time())
    got = receiver.at(path)
    first: dict[str, float] = {}
    attempts: dict[str, list[str]] = {}
    for request in got:
        first.setdefault(request.headers["Hourglass-Message-Id"], request.at)
        attempts.setdefault(request.headers["Hourglass-Message-Id"], []).append(request.headers["Hourglass-Attempt"])
    assert set(first) == set(due), f"lost: {sorted(set(due) - set(first))}"
    late = sorted(first[i] - due[i] for i in due)
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    last = max(r.at for r in got if r.headers["Hourglass-Message-Id"] == marked)
    print(f"crash at {crashing.phase} ({stack.mode}): {len(late)} messages, lateness p50 {late[len(late) // 2]:.1f} s, "
          f"p99 {p99:.1f} s, max {late[-1]:.1f} s; the marked one first {first[marked] - due[marked]:.1f} s, "
          f"last {last - due[marked]:.1f} s; attempts {sorted(Counter(map(tuple, attempts.values())).items())}")
    assert attempts.pop(marked) == MARKED_ATTEMPTS[crashing.phase]
    # A batch-mate may have begun or been delivered in the dead process too: then it is taken over (attempt 2).
    assert {i: a for i, a in attempts.items() if a not in (["1"], ["2"], ["1", "2"])} == {}
