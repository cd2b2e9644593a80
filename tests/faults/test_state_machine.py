"""A stateful model of clients, sweeps, dispatches, a fake clock and injected faults, checked by hypothesis.
HOURGLASS_FAULT_MACHINE_EXAMPLES: how many stories (10, as `make test` runs it; `make test-slow` runs 25)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.timer_queue import read_timers
from hourglass.core import schedule
from hourglass.core.lifecycle import can_transition
from hourglass.core.model import Status
from hourglass.core.timestamps import from_ms, parse_rfc3339
from hourglass.service.dispatch import Dispatcher
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from tests.conftest import FakeClock
from tests.faults.proxies import Crash, FaultyClient
from tests.integration.conftest import Harness, harness_for

QUEUES = ("a", "b")
VISIBILITY = timedelta(seconds=360)
FINAL = {"delivered", "failed", "cancelled", "expired"}
pytestmark = pytest.mark.long_form
ANSWERS = st.sampled_from([[], [], [], [503], [404], [503, 503, 503], [429, 200]])


@dataclass
class Expected:
    queue: str
    due: datetime
    answers: list[int]
    cancelled: bool = False
    queue_gone: bool = False
    faulted: bool = False
    schedules: int = 1  # a successful PATCH schedules the message anew, possibly for the same instant
    deliveries: list[tuple[datetime, str, int, int]] = field(default_factory=list)


@dataclass
class InFlight:
    """A timer SQS holds: handed out once `visible` has passed."""

    visible: datetime
    record: str
    body: str


def legal(before: tuple[str, str] | None, after: tuple[str, str] | None) -> bool:
    """A write that makes a message is pending or expired; one that changes its version is a legal transition;
    one that keeps its version (the outbox's bookkeeping of a notice) keeps its status."""
    if before is None:
        return after is not None and after[0] in ("pending", "expired")
    if after is None:
        return False
    if before[1] == after[1]:
        return before[0] == after[0]
    return can_transition(Status(before[0]), Status(after[0]))


class TransitionChecker:
    """Wraps the DynamoDB client: every successful write to a message must be a legal status transition."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.illegal: list[str] = []

    def _state(self, key: dict[str, Any]) -> tuple[str, str] | None:
        item = self._client.get_item(TableName="messages", Key=key, ConsistentRead=True).get("Item")
        return None if item is None else (str(item["status"]["S"]), str(item.get("version", {}).get("N")))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in ("put_item", "update_item"):
            return attr

        def call(**kwargs: Any) -> Any:
            key = kwargs.get("Key") or {k: kwargs["Item"][k] for k in ("pk", "sk")}
            if not key["sk"]["S"].startswith("m#"):
                return attr(**kwargs)
            before = self._state(key)
            answer = attr(**kwargs)
            after = self._state(key)
            if not legal(before, after):
                self.illegal.append(f"{key['sk']['S']}: {before and before[0]} -> {after and after[0]} by {name}")
            return answer

        return call


class DelayQueueMachine(RuleBasedStateMachine):
    messages = Bundle("messages")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self._context = harness_for(self.clock)
        self.h: Harness = self._context.__enter__()
        self.h.ctx.settings = replace(self.h.ctx.settings, shards=2)
        self.ddb = TransitionChecker(self.h.ctx.store.client)
        self.sqs = FaultyClient(self.h.ctx.timers.client)
        self.h.ctx.store.client = self.ddb
        self.h.ctx.timers.client = self.sqs
        self.h.ctx.post = self._receive
        self.expected: dict[str, Expected] = {}
        self.in_flight: list[InFlight] = []
        self.crash_after_post: bool | None = None
        self.violations: list[str] = []
        for queue in QUEUES:
            self._put_queue(queue)

    # the outside world ----------------------------------------------------------------------
    def _put_queue(self, queue: str) -> None:
        target = {"type": "http", "url": f"http://127.0.0.1:9/{queue}"}
        status, _ = self.h.call("PUT", f"/v1/queues/{queue}", {"target": target, "retry": {"max_attempts": 3}})
        assert status in (200, 201)

    def _receive(self, url: str, body: bytes, headers: dict[str, str], **_: Any) -> HttpReply:
        message_id = headers["Hourglass-Message-Id"]
        expected = self.expected[message_id]
        now = self.clock()
        due = parse_rfc3339(headers["Hourglass-Due-At"])
        if expected.cancelled:
            self.violations.append(f"{message_id} delivered after a successful cancel")
        if now < due or now < expected.due:
            self.violations.append(f"{message_id} delivered at {now}, before its due time {max(due, expected.due)}")
        occurrence = (headers["Hourglass-Due-At"], expected.schedules)
        if not expected.faulted and any((d, n) == occurrence for _, d, _, n in expected.deliveries):
            self.violations.append(f"{message_id} delivered twice for due time {headers['Hourglass-Due-At']}")
        status = expected.answers.pop(0) if expected.answers else 200
        expected.deliveries.append((now, headers["Hourglass-Due-At"], status, expected.schedules))
        if self.crash_after_post is not None:
            after = self.crash_after_post
            self.crash_after_post = None
            expected.faulted = True
            if after:
                raise Crash("dispatcher killed after the callback answered")
        return HttpReply(status=status, headers={}, body=b"{}")

    def _collect_timers(self) -> None:
        for timer in self.h.timers():
            due, sent = from_ms(timer["json"]["due"]), from_ms(timer["json"]["sent"])
            visible = sent + timedelta(seconds=schedule.timer_delay(due, sent))
            self.in_flight.append(InFlight(visible, timer["record"], timer["body"]))

    def _visible(self) -> list[InFlight]:
        return sorted((t for t in self.in_flight if t.visible <= self.clock()), key=lambda t: t.visible)

    def _dispatch(self, timer: InFlight) -> None:
        self.in_flight.remove(timer)
        try:
            failed = Dispatcher(self.h.ctx).run_batch([(timer.record, timer.body)])
        except Crash:
            failed = [timer.record]
        if failed:
            self.in_flight.append(InFlight(self.clock() + VISIBILITY, timer.record, timer.body))
        self._collect_timers()

    # rules ------------------------------------------------------------------------------------
    @rule(
        target=messages,
        queue=st.sampled_from(QUEUES),
        delay=st.sampled_from([0, 2.5, 20, 200, 330, 1000]),
        answers=ANSWERS,
    )
    def create(self, queue: str, delay: float, answers: list[int]) -> str:
        status, doc = self.h.call("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1, "delay": delay}]})
        assert status == 201, doc
        [created] = doc["messages"]
        self.expected[created["id"]] = Expected(queue, parse_rfc3339(created["due_at"]), list(answers))
        self._collect_timers()
        return str(created["id"])

    @rule(message=messages)
    def cancel(self, message: str) -> None:
        expected = self.expected[message]
        status, doc = self.h.call("DELETE", f"/v1/queues/{expected.queue}/messages/{message}")
        assert status in (204, 409), doc
        if status == 204:
            expected.cancelled = True

    @rule(message=messages, delay=st.sampled_from([0, 5, 100, 400, 2000]))
    def patch(self, message: str, delay: float) -> None:
        expected = self.expected[message]
        status, doc = self.h.call("PATCH", f"/v1/queues/{expected.queue}/messages/{message}", {"delay": delay})
        assert status in (200, 409), doc
        if status == 200:
            expected.due = parse_rfc3339(doc["due_at"])
            expected.schedules += 1
        self._collect_timers()

    @rule(queue=st.sampled_from(QUEUES))
    def delete_and_recreate_queue(self, queue: str) -> None:
        statuses = {i: self.h.ctx.store.get_message(queue, i) for i, e in self.expected.items() if e.queue == queue}
        status, _ = self.h.call("DELETE", f"/v1/queues/{queue}")
        assert status == 204
        for message_id, message in statuses.items():
            assert message is not None
            # pending ones are cancelled; one whose dispatcher died mid-delivery ends cancelled when taken over
            self.expected[message_id].queue_gone |= not message.status.finished
            self.expected[message_id].cancelled |= message.status is Status.PENDING
        self._put_queue(queue)

    @rule()
    def sweep(self) -> None:
        self.h.sweep()
        self._collect_timers()

    @rule(seconds=st.sampled_from([1, 5, 30, 60, 200]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def dispatch_visible(self) -> None:
        for timer in self._visible():
            if timer in self.in_flight:
                self._dispatch(timer)

    @rule(after_post=st.booleans())
    def dispatcher_dies(self, after_post: bool) -> None:
        visible = self._visible()
        if visible:
            self.crash_after_post = after_post
            self._dispatch(visible[0])
            self.crash_after_post = None

    @rule(message=consumes(messages))
    def sqs_hands_out_a_duplicate(self, message: str) -> None:
        copies = [t for t in self.in_flight if message in {timer.id for timer in read_timers(t.body)}]
        if copies:
            self.in_flight.append(InFlight(copies[0].visible, copies[0].record + "-dup", copies[0].body))

    @rule(entirely=st.booleans())
    def timer_sends_fail(self, entirely: bool) -> None:
        if entirely:
            self.sqs.fail("send_message_batch", times=2)
        else:
            self.sqs.fail_entries(lambda entry: read_timers(entry["MessageBody"])[0].id[-1] in "02468ace")

    @rule()
    def timer_sends_heal(self) -> None:
        self.sqs.heal()

    # invariants -------------------------------------------------------------------------------
    @invariant()
    def no_violation(self) -> None:
        assert self.violations == []
        assert self.ddb.illegal == []

    def _all_final(self) -> bool:
        stored = [self.h.ctx.store.get_message(e.queue, i) for i, e in self.expected.items()]
        return all(m is not None and m.status.value in FINAL for m in stored)

    def teardown(self) -> None:
        try:
            self.sqs.heal()
            for _ in range(40):
                self.clock.advance(120)
                self.sweep()
                self.dispatch_visible()
                if not self.in_flight and self._all_final():
                    break
            self.no_violation()
            for message_id, expected in self.expected.items():
                stored = self.h.ctx.store.get_message(expected.queue, message_id)
                assert stored is not None
                assert stored.status.value in FINAL, f"{message_id} stuck in {stored.status.value}"
                if stored.status is Status.DELIVERED:
                    assert any(200 <= code < 300 for _, _, code, _ in expected.deliveries)
                if not (expected.cancelled or expected.queue_gone) and stored.status is Status.CANCELLED:
                    raise AssertionError(f"{message_id} cancelled without a cancel")
        finally:
            self._context.__exit__(None, None, None)


# `make test` runs 10 stories; `make test-slow` (in CI) the 25 it used to.
DelayQueueMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("HOURGLASS_FAULT_MACHINE_EXAMPLES", "10")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_delay_queue_state_machine = DelayQueueMachine.TestCase
