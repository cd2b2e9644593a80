"""The deployed dispatcher killed mid-batch (the crash switch, HOURGLASS_CRASH_AT): every message of the batch it
was working on arrives within the crash-recovery budget (docs/guarantees.md, "Crash recovery"), none lost."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hourglass import contract
from hourglass.service import crash_switch

from tests.e2e.conftest import MODES, Client, Receiver, Stack
from tests.e2e.test_delivery import due_epoch, http_queue, post

pytestmark = pytest.mark.skipif("deployed" not in MODES, reason="the deployed stack: make test-deployed")

MESSAGES = 12
P99_BUDGET = 60.0
MAX_BUDGET = 120.0


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


@pytest.fixture
def crashing(stack: Stack) -> Iterator[str]:
    """The dispatcher dies (its process exits) at the begin of a marked message's first attempt, until teardown."""
    if stack.mode != "deployed":
        pytest.skip("the crash switch of a deployed dispatcher (the local runtime's: make bench, crash)")
    function = dispatcher(stack)
    lam = stack.client("lambda")
    variables: dict[str, Any] = lam.get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    set_environment(stack, function, {**variables, contract.CRASH_AT: "begun"})
    try:
        yield function
    finally:
        set_environment(stack, function, variables)


@pytest.mark.usefixtures("crashing")
def test_messages_whose_dispatcher_died_mid_batch_arrive_within_the_budget(
    api: Client, receiver: Receiver, stack: Stack
) -> None:
    queue = http_queue(api, receiver, "/crashed")
    # One POST: the batch-mates' timers travel with the marked one's, which is due first.
    bodies = [{crash_switch.MARK: True}] + [{"n": n} for n in range(1, MESSAGES)]
    created = post(api, queue, *({"body": body, "delay": 3 + (n > 0) * (1 + n % 3)} for n, body in enumerate(bodies)))
    due = {m["id"]: due_epoch(m) for m in created}
    got = receiver.wait_for("/crashed", count=MESSAGES, timeout=max(due.values()) - time.time() + MAX_BUDGET)
    first: dict[str, float] = {}
    for request in got:
        first.setdefault(request.headers["Hourglass-Message-Id"], request.at)
    late = sorted(first[i] - due[i] for i in due if i in first)
    assert set(first) == set(due), f"lost: {sorted(set(due) - set(first))}"
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    print(f"crash mid-batch ({stack.mode}): {len(late)} messages, lateness p50 {late[len(late) // 2]:.1f} s, "
          f"p99 {p99:.1f} s, max {late[-1]:.1f} s")
    assert p99 <= P99_BUDGET and late[-1] <= MAX_BUDGET, f"lateness p99 {p99:.1f} s, max {late[-1]:.1f} s: {late}"
    # The marked message's first attempt died after its begin: it arrives from the takeover at its lease's end.
    marked = created[0]["id"]
    assert [r.headers["Hourglass-Attempt"] for r in got if r.headers["Hourglass-Message-Id"] == marked] == ["2"]
    assert max(Counter(r.headers["Hourglass-Message-Id"] for r in got).values()) == 1
