"""The world the whole-system model runs in: the in-process stack on a fake clock, its timer queue played as SQS
would (delays, visibility, receive counts, the DLQ), targets and failure destinations that answer as told."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from hourglass.adapters.http_target import HttpReply
from hourglass.adapters.timer_queue import read_timers
from hourglass.core import handoff
from hourglass.core.keys import SWEEPER_PK, SWEEPER_STATE_SK
from hourglass.core.model import Message
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.handlers import sweeper
from hourglass.service.dead_letters import DeadLetters
from hourglass.service.dispatch import Dispatcher
from hourglass.service.rest import Api
from moto.core.utils import unix_time_millis
from moto.sqs.models import sqs_backends

from devstack import liveness
from tests.conftest import FakeClock
from tests.faults.proxies import Crash, FaultyClient
from tests.faults.test_state_machine import VISIBILITY, TransitionChecker
from tests.integration.conftest import Harness, harness_for
from tests.model.reference import Calendar, Reference

SWEEP_EVERY = timedelta(seconds=60)  # EventBridge's rate(1 minute)
MAX_RECEIVES = 10  # the timer queue's redrive policy (stacks/hourglass_stack.py MAX_RECEIVE_COUNT)
DDB_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
SQS_WRITES = ("send_message_batch", "send_message")
# Answers a target or destination gives, by mode.
ANSWER = {"ok": 200, "transient": 503, "permanent": 404}
# What every HTTP target of the model answers in its body (the attempt history keeps it).
REPLY = b'{"seen": true}'


@dataclass
class Timer:
    """A timer-queue message as SQS holds it."""

    record: str
    body: str
    visible: datetime
    receives: int = 0


@dataclass
class Modes:
    """How a queue's target and failure destination answer: a script first, then the mode."""

    target: str = "ok"
    script: list[int] = field(default_factory=list)
    notice: str = "ok"


class World:
    def __init__(self, reference: Reference) -> None:
        self.clock = FakeClock()
        self.reference = reference
        self._context = harness_for(self.clock)
        self.h: Harness = self._context.__enter__()
        ctx = self.h.ctx
        # SNS targets and destinations publish to topics that feed the SQS target and notice queues.
        ctx.settings = replace(ctx.settings, shards=2, sns_targets="target*")
        # Bulk operations write from threads; moto's in-memory tables are not safe under them (DynamoDB is).
        self.ddb = FaultyClient(ctx.store.client)
        self.checker = TransitionChecker(self.ddb)
        self.sqs = FaultyClient(ctx.timers.client)
        ctx.store.client = self.checker
        ctx.timers.client = self.sqs
        ctx.post = self._post
        ctx.targets.send = self._started(ctx.targets.send)  # type: ignore[method-assign]
        ctx.services.topics.publish = self._started(ctx.services.topics.publish)  # type: ignore[method-assign]
        self._call = self.h.call
        self.h.call = self._configuring  # type: ignore[method-assign]
        self.target_url = self.h.sqs.create_queue(QueueName="target-model")["QueueUrl"]
        self.notice_url = self.h.sqs.create_queue(QueueName="target-notices")["QueueUrl"]
        self.target_topic = self._topic("target-model", self.target_url)
        self.notice_topic = self._topic("target-notices", self.notice_url)
        self.modes: dict[str, Modes] = {}
        self.timers: list[Timer] = []
        self.dead: list[Timer] = []
        self.next_sweep = self.clock() + SWEEP_EVERY
        self.crashes = 0
        # The timer a dispatcher is working on when the world handed it over in time for its pacing slot, alone in
        # its record (the threads of a pack sleep on one fake clock: their sleeps add up). None: none such.
        self.handed: handoff.Timer | None = None
        # The sweeper and the dispatchers are processes of their own (Lambda containers): the same table, queues
        # and targets, their own memory (pacing caches, notes of slots handed off, the sweeper's view of limits);
        # one that dies comes back with none.
        self.sweeper_ctx = replace(ctx)
        self.dispatcher_ctx = replace(ctx)
        # Two ingest containers take the REST calls in turn: a message handed off by one may have to give way
        # to a higher priority handed off by the other.
        second = replace(ctx)
        self._ingest = [self._call, replace(self.h, ctx=second, api=Api(second)).call]
        self._calls = 0

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    # the outside world ------------------------------------------------------------------------
    def _topic(self, name: str, queue_url: str) -> str:
        """An SNS topic whose messages reach `queue_url` as published (raw delivery)."""
        sns = self.h.ctx.services.topics.client
        topic = str(sns.create_topic(Name=name)["TopicArn"])
        attributes = self.h.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        raw = {"RawMessageDelivery": "true"}
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=attributes["QueueArn"], Attributes=raw)
        return topic

    def _ingesting(self, method: str, path: str, body: Any = None, params: Any = None) -> tuple[int, Any]:
        self._calls += 1
        return self._ingest[self._calls % 2](method, path, body, params)

    def _configuring(self, method: str, path: str, body: Any = None, params: Any = None) -> tuple[int, Any]:
        """A REST call; a queue PUT's limits go to the reference, for the lifetime it created or changed."""
        parts = path.strip("/").split("/")
        if method != "PUT" or len(parts) != 3 or parts[:2] != ["v1", "queues"]:
            return self._ingesting(method, path, body, params)
        status = None
        try:
            status, doc = self._ingesting(method, path, body, params)
            return status, doc
        finally:
            stored = self.h.ctx.store.get_queue(parts[2], consistent=True)
            if stored is not None and status in (None, 200, 201):
                self.reference.configured(parts[2], stored.created_at, body if status else None)

    def _started(self, send: Callable[..., None]) -> Callable[..., None]:
        """`send` of an SQS or SNS target, noting each delivery's start (notices go to the other queue and topic)."""

        def sending(to: str, text: str, **kwargs: Any) -> None:
            if to in (self.target_url, self.target_topic):
                doc = json.loads(text)
                self._start(self.h.ctx.store.get_message(doc["queue"], doc["id"]))
            send(to, text, **kwargs)

        return sending

    def _post(self, url: str, body: bytes, headers: dict[str, str], **_: Any) -> HttpReply:
        kind, queue = url.rsplit("/", 2)[-2:]
        modes = self.modes.setdefault(queue, Modes())
        if kind == "n":
            if json.loads(body).get("event") == "queue.paused":
                self.reference.queue_notice_tried(queue, modes.notice)
            if modes.notice == "ok":  # a notice counts once the destination took it
                self.reference.notice_received(json.loads(body), "http")
            return HttpReply(status=ANSWER[modes.notice], headers={}, body=b"{}")
        message_id = headers["Hourglass-Message-Id"]
        self.reference.signed(queue, headers, body, self.clock())
        stored = self.h.ctx.store.get_message(queue, message_id)
        self._start(stored)
        self.reference.delivered(stored, queue, message_id, self.clock(), crashed=self.crashes > 0)
        status = modes.script.pop(0) if modes.script else ANSWER[modes.target]
        return HttpReply(status=status, headers={}, body=REPLY)

    def _start(self, stored: Message | None) -> None:
        """An attempt of `stored` begins reaching its target now: the reference notes it, with the timer it started
        from when the world handed that one over in time (`handed`)."""
        own = self.handed if self.handed is not None and stored is not None and self.handed.id == stored.id else None
        self.reference.started(stored, self.clock(), own=own, crashed=self.crashes > 0, calendar=self.calendar)
        generation = None if stored is None else self.reference.of(stored.queue, stored.queue_epoch)
        if stored is not None and generation is not None and generation.alive and generation.ordered_always:
            store = self.h.ctx.store
            found, _ = store.list_messages(stored.queue, status=None, limit=1000, cursor=None)
            others = [m for m in found if m.flow_key == stored.flow_key]
            state = store.key_order(stored.queue, stored.flow_key or "")
            self.reference.check_order(stored, others, state, self.clock())

    def calendar(self, queue: str) -> Calendar:
        """Every pacing slot the store holds for `queue` (µs since the epoch), by scope: None for the queue's own,
        a flow key's ("" for messages without one). Read from its window items (`#pace#w#<width>#<index>`,
        `#pace#k#<len>:<key>#w#<width>#<index>`); guards (negative offsets repeat the window before's last slot) and
        items of other shapes are left out."""
        request = {
            "TableName": self.h.ctx.settings.table,
            "KeyConditionExpression": "pk = :q AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":q": {"S": queue}, ":p": {"S": "#pace#"}},
            "ConsistentRead": True,
        }
        slots: Calendar = {}
        while True:
            page = self.h.ddb.query(**request)
            for item in page.get("Items", []):
                window = _window(item["sk"]["S"].removeprefix("#pace#"))
                if window is None or "taken" not in item:
                    continue
                scope, start_us = window
                taken = (int(part, 36) for part in item["taken"]["S"].split() if part != "-")
                slots.setdefault(scope, []).extend(start_us + offset for offset in taken if offset >= 0)
            if "LastEvaluatedKey" not in page:
                return slots
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def read_sqs(self) -> None:
        """What reached the SQS target and destination (directly or through their SNS topics): deliveries checked
        as the HTTP ones, notices noted."""
        for url, is_notice in ((self.target_url, False), (self.notice_url, True)):
            while got := self.h.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
                for m in got:
                    doc = json.loads(m["Body"])
                    if is_notice:
                        self.reference.notice_received(doc, "sqs")
                    else:
                        stored = self.h.ctx.store.get_message(doc["queue"], doc["id"])
                        # read after the fact: no lateness judged
                        self.reference.delivered(
                            stored, doc["queue"], doc["id"], stored.due_at if stored else self.clock(), started=False
                        )
                    self.h.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    # crashes ------------------------------------------------------------------------------------
    def crashing(self, write: int, action: Callable[[], object]) -> bool:
        """Runs `action` with the process dying just before its `write`-th write (DynamoDB or the timer queue);
        True when it died."""
        count = [0]

        def nth(_: dict[str, Any]) -> bool:
            count[0] += 1
            return count[0] == write

        for operation in DDB_WRITES:
            self.ddb.crash(operation, when=nth)
        for operation in SQS_WRITES:
            self.sqs.crash(operation, when=nth)
        try:
            action()
            return False
        except Crash:
            self.crashes += 1
            return True
        finally:
            self.ddb.heal()
            self.sqs.heal()

    # the timer queue as SQS plays it ----------------------------------------------------------
    def collect(self) -> None:
        """Moves what was sent to the timer queue into `timers`, each visible after its DelaySeconds."""
        backend = sqs_backends["123456789012"]["us-east-1"]
        queue = backend.queues[self.h.ctx.settings.timer_queue_url.rsplit("/", 1)[-1]]
        now_ms = unix_time_millis()
        delays = {}
        for m in queue._messages:
            delays[m.id] = max(0.0, (m.delayed_until - now_ms) / 1000)
            m.delayed_until = 0.0
        url = self.h.ctx.settings.timer_queue_url
        while got := self.h.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for m in got:
                visible = self.clock() + timedelta(seconds=round(delays.get(m["MessageId"], 0.0)))
                self.timers.append(Timer(m["MessageId"], m["Body"], visible))
                self.h.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    def visible(self) -> list[Timer]:
        return sorted((t for t in self.timers if t.visible <= self.clock()), key=lambda t: t.visible)

    def dispatch(self, timer: Timer) -> None:
        """SQS hands `timer` to a dispatcher; a failed record comes back after the visibility timeout and,
        received MAX_RECEIVES times, goes to the DLQ."""
        self.timers.remove(timer)
        timer.receives += 1
        self.handed = self._in_time(timer.body)
        try:
            failed = Dispatcher(self.dispatcher_ctx).run_batch([(timer.record, timer.body)])
        except Crash:
            self.crashes += 1
            self.dispatcher_ctx = replace(self.h.ctx)
            failed = [timer.record]
        finally:
            self.handed = None
        if failed:
            timer.visible = self.clock() + VISIBILITY
            (self.dead if timer.receives >= MAX_RECEIVES else self.timers).append(timer)
        self.collect()

    def _in_time(self, body: str) -> handoff.Timer | None:
        """The record's timer when it is alone in it, paced, and handed over no later than its slot's start."""
        with suppress(Exception):
            timers = read_timers(body)
            if len(timers) == 1 and timers[0].latest_ms is not None and self.clock() <= from_ms(timers[0].due_ms):
                return timers[0]
        return None

    def dead_letters(self) -> None:
        """The DLQ consumer; what it cannot finish now stays in the DLQ."""
        waiting, self.dead = self.dead, []
        for timer in waiting:
            try:
                failed = DeadLetters(self.h.ctx).run_batch([(timer.record, timer.body, timer.receives)])
            except Crash:
                self.crashes += 1
                failed = [timer.record]
            if failed:
                self.dead.append(timer)

    def sweep(self) -> None:
        """One scheduled sweeper run, as the Lambda makes it (sweep, then the upkeep: stale operations, the
        outbox, schedule chains); a crash ends the invocation."""
        try:
            sweeper.handle(self.sweeper_ctx, None, None)
        except Crash:
            self.crashes += 1
            self.sweeper_ctx = replace(self.h.ctx)
        self.collect()

    def overlapping_sweeps(self) -> None:
        """Two scheduled runs from one watermark (a run slower than the interval, a schedule invoked twice): the
        second reads what the first handed off; an unclaimed message gets a second timer (`QueueLimits.claims`)."""
        key = {"pk": {"S": SWEEPER_PK}, "sk": {"S": SWEEPER_STATE_SK}}
        before = self.h.ddb.get_item(TableName=self.h.ctx.settings.table, Key=key, ConsistentRead=True).get("Item")
        self.sweep()
        if before is None:
            self.h.ddb.delete_item(TableName=self.h.ctx.settings.table, Key=key)
        else:
            self.h.ddb.put_item(TableName=self.h.ctx.settings.table, Item=before)
        self.sweep()

    def run_for(self, seconds: float, *, step_limit: int = 400) -> None:
        """Time passes: sweeps on their schedule, each timer when SQS would hand it out, the DLQ consumer."""
        end = self.clock() + timedelta(seconds=seconds)
        self.collect()
        for _ in range(step_limit):
            upcoming = min((t.visible for t in self.timers), default=None)
            if upcoming is not None and upcoming <= self.next_sweep and upcoming <= end:
                self.clock.now = max(self.clock(), upcoming)
                self.dispatch(min(self.timers, key=lambda t: t.visible))
            elif self.next_sweep <= end:
                self.clock.now = max(self.clock(), self.next_sweep)
                self.next_sweep += SWEEP_EVERY
                self.sweep()
                self.dead_letters()
            else:
                break
        self.clock.now = max(self.clock(), end)
        self.read_sqs()

    # the stored state ---------------------------------------------------------------------------
    def _items(self, **kwargs: Any) -> list[dict[str, Any]]:
        """Every message item (a Scan, page by page: big bodies fill a page fast)."""
        request = {
            "TableName": self.h.ctx.settings.table,
            "FilterExpression": "begins_with(sk, :m)",
            "ExpressionAttributeValues": {":m": {"S": "m#"}},
            **kwargs,
        }
        items: list[dict[str, Any]] = []
        while True:
            page = self.h.ddb.scan(**request)
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def messages(self) -> list[Message]:
        found = []
        for key in self._items(ProjectionExpression="pk, sk"):
            with suppress(Exception):
                message = self.h.ctx.store.get_message(key["pk"]["S"], key["sk"]["S"].removeprefix("m#"))
                if message is not None:
                    found.append(message)
        return found

    def verdicts(self) -> dict[str, str | None]:
        """The liveness check's verdict on every message (timers in SQS and in the DLQ count as waiting)."""
        waiting = frozenset(t.id for timer in [*self.timers, *self.dead] for t in read_timers(timer.body))
        now_ms = to_ms(self.clock())
        items = self._items(
            ProjectionExpression="pk, sk, #st, claimed_until, sweep_pk, sweep_sk",
            ExpressionAttributeNames={"#st": "status"},
        )
        return {item["sk"]["S"].removeprefix("m#"): liveness.verdict(item, now_ms, waiting) for item in items}


def _window(sk: str) -> tuple[str | None, int] | None:
    """A pacing window item's scope and start (µs) from its sort key after `#pace#`; None: not a window item."""
    scope: str | None = None
    if sk.startswith("k#"):
        length, _, rest = sk[2:].partition(":")
        if not length.isdigit():
            return None
        scope, sk = rest[: int(length)], rest[int(length) + 1 :]
    parts = sk.split("#")
    if len(parts) != 3 or parts[0] != "w" or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return scope, int(parts[1]) * int(parts[2])
