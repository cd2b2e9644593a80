"""The whole-system model test (issue 23): every REST action, target answer, service run and crash, in any order,
against the reference model's promises (tests/model/reference.py). Env: HOURGLASS_MODEL_EXAMPLES (count: 10 by
default, as `make test` runs it; `make test-slow` runs 30), HOURGLASS_MODEL_RANDOM=1 (new draws),
HOURGLASS_MODEL_REPORT=<file> (append violations instead of failing)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hourglass.core import delivery_control, message_partitions, validation
from hourglass.core import ordering as core_ordering
from hourglass.core.model import Status
from hourglass.core.timestamps import format_rfc3339
from hourglass.service import ordering as ordered
from hourglass.service.schedules import is_current
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from tests.model.reference import Generation, Reference, comparable
from tests.model.world import REPLY, Modes, World

QUEUES = ("a", "b")
SCHEDULES = ("s1", "s2")
# Each example is a story of 25 steps and a half-hour drain (seconds of CPU each): `make test` replays 10, and
# `make test-slow` (in CI) the 30 that `make test` used to, so every fixed story still runs on each change.
pytestmark = pytest.mark.long_form
EXAMPLES = int(os.environ.get("HOURGLASS_MODEL_EXAMPLES", "10"))
STEPS = int(os.environ.get("HOURGLASS_MODEL_STEPS", "25"))
# Shrinking a failing story takes minutes: asked for (HOURGLASS_MODEL_SHRINK=1) when hunting a new hole.
SHRINK = os.environ.get("HOURGLASS_MODEL_SHRINK") == "1"
# `make test` replays the same examples every run, so a red run names a change, not a draw; `make soak` and
# `make model` draw new ones (HOURGLASS_MODEL_RANDOM=1) to hunt holes nobody has seen yet.
RANDOM = os.environ.get("HOURGLASS_MODEL_RANDOM") == "1"
DRAIN_SECONDS = 1800
# Just under POST's 256 KiB body limit: its SQS envelope, or its failure notice, is over SQS's.
BIG_BODY = "x" * 262_140
RATES = (None, None, 0.1, 1, 100)
DELAYS = (None, 0, 5, 45, 200, 600)
ACTIONS = ("cancel", "redeliver", "shift")
# Flow control (v1.2): a queue's per-key limits, and the keys and priorities messages carry.
FLOW_CONTROLS = (
    None,
    None,
    {"key_rate_limit": 0.5},
    {"key_rate_limit": 5, "key_max_concurrency": 1},
    # A key concurrency its key rate cannot reach within a lease: attempts take no key slot.
    {"key_rate_limit": 0.5, "key_max_concurrency": 200},
)
FLOW_KEYS = (None, None, "k1", "k2")
# The signing secrets of a queue through a key rotation: none, old, old and next, new.
ROLL = ((), ("old",), ("old", "new"), ("new",))

# Delivery windows on the world's clock (Saturday 2026-11-21 10:00 UTC at the start): one opening soon, one
# closing soon (what waits past 10:03 goes a day later), and a recipient's own across midnight in Chatham.
WINDOWS = (
    None,
    None,
    {"timezone": "UTC", "from": "10:05", "to": "10:15"},
    {"timezone": "UTC", "from": "10:00", "to": "10:03"},
)
OWN_WINDOWS = (None, None, None, {"timezone": "Pacific/Chatham", "from": "23:50", "to": "00:20"})
# Ordered delivery per key (v1.3), continuing or holding after a failure.
ORDERINGS = (None, None, {"by": "flow_key"}, {"by": "flow_key", "on_failure": "hold"})
# A key's item keeps 2 waiters here (12 in production: `core.ordering.INLINE`), so that a story's lines of 3 or
# more go through overflow items: spilled, refilled, cancelled, woken by a PUT without ordering.
LINE_INLINE = 2
# A circuit breaker that a failing target trips within a few attempts (the queue then pauses itself).
BREAKERS = (None, None, {"failure_ratio": 0.5, "min_attempts": 2, "window": 60})


def queue_doc(
    world: World,
    name: str,
    target: str,
    rate: float | None,
    destination: str | None,
    attempts: int,
    window: dict[str, str] | None = None,
    breaker: dict[str, Any] | None = None,
) -> dict:
    doc: dict[str, Any] = {"retry": {"max_attempts": attempts, "backoff_base": 1, "backoff_max": 30}}
    if window is not None:
        doc["window"] = window
    if breaker is not None:
        doc["circuit_breaker"] = breaker
    doc["target"] = {
        "sqs": {"type": "sqs", "queue_url": world.target_url},
        "sns": {"type": "sns", "topic_arn": world.target_topic},
        "http": {"type": "http", "url": f"http://127.0.0.1:9/t/{name}"},
    }[target]
    if rate is not None:
        doc["rate_limit"] = rate
    if destination == "sqs":
        doc["failure_destination"] = {"type": "sqs", "queue_url": world.notice_url}
    elif destination == "sns":
        doc["failure_destination"] = {"type": "sns", "topic_arn": world.notice_topic}
    elif destination == "http":
        doc["failure_destination"] = {"type": "http", "url": f"http://127.0.0.1:9/n/{name}"}
    return doc


class SystemModel(RuleBasedStateMachine):
    messages = Bundle("messages")

    def __init__(self) -> None:
        super().__init__()
        self.reference = Reference()
        self.world = World(self.reference)
        self.twins = 0
        self.settings: dict[str, dict[str, Any]] = {}  # each queue's last PUT document
        self.inline, core_ordering.INLINE = core_ordering.INLINE, LINE_INLINE

    # helpers ------------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, rule: str = "rule 1") -> tuple[int, Any]:
        status, doc = self.world.h.call(method, path, body)
        if status >= 500:
            self.reference.violate(rule, f"{method} {path} answered {status}: {doc}")
        return status, doc

    def act(self, crash_at: int | None, action: Callable[[], object]) -> bool:
        """Runs a user's action, maybe dying before its `crash_at`-th write; True when it died."""
        if crash_at is None:
            action()
            crashed = False
        else:
            crashed = self.world.crashing(crash_at, action)
        self.world.collect()
        return crashed

    def sync(self, name: str) -> None:
        """After a crash the model learns from the store whether the queue's lifetime ended or began."""
        stored = self.world.h.ctx.store.get_queue(name, consistent=True)
        live = self.reference.live(name)
        if live is not None and (stored is None or stored.created_at != live.epoch):
            live.alive = False
            live = None
        if live is None and stored is not None:
            self.reference.generations.append(Generation(name, stored.created_at, target_failed_ever=True))

    # queues -------------------------------------------------------------------------------------
    @rule(
        name=st.sampled_from(QUEUES),
        kind=st.sampled_from(("http", "http", "sqs", "sns")),
        rate=st.sampled_from(RATES),
        destination=st.sampled_from((None, "http", "sqs", "sns")),
        attempts=st.integers(1, 3),
        window=st.sampled_from(WINDOWS),
        flow=st.sampled_from(FLOW_CONTROLS),
        breaker=st.sampled_from(BREAKERS),
        ordering=st.sampled_from(ORDERINGS),
    )
    def put_queue(
        self,
        name: str,
        kind: str,
        rate: float | None,
        destination: str | None,
        attempts: int,
        window: Any = None,
        flow: dict | None = None,
        breaker: dict[str, Any] | None = None,
        ordering: dict[str, str] | None = None,
    ) -> None:
        settings = queue_doc(self.world, name, kind, rate, destination, attempts, window, breaker)
        if flow is not None:
            settings["flow_control"] = flow
        if ordering is not None:
            settings["ordering"] = ordering
        status, doc = self.call("PUT", f"/v1/queues/{name}", settings)
        assert status in (200, 201), doc
        self.settings[name] = settings
        stored = self.world.h.ctx.store.get_queue(name, consistent=True)
        assert stored is not None
        live = self.reference.live(name)
        created = live is None
        if live is None:
            live = Generation(name, stored.created_at)
            live.queue_notices_before = self.reference.queue_notices.count(name)
            self.reference.generations.append(live)
            self.world.modes.pop(name, None)
        elif destination != live.destination:
            live.destination_since = self.world.clock()
        if live.destination is None and destination is not None:
            live.destination_since = self.world.clock()
        live.target, live.rate, live.destination, live.max_attempts = kind, rate, destination, attempts
        live.ordered_always = (created or live.ordered_always) and ordering is not None
        live.ordered_ever |= ordering is not None
        # A PUT that names no signing secret keeps them (they are never returned); a new lifetime has none.
        if not created and validation.window(window) != live.window:
            live.window_changed = True
        live.window = validation.window(window)
        live.breaker_ever |= breaker is not None
        live.paused_notice_owed &= destination is not None  # a removed destination drops the notice
        # A key's rate paces at worst every message of the lifetime (all of one key), as a queue's would.
        for limit in (rate, (flow or {}).get("key_rate_limit")):
            if limit is not None:
                live.slowest_rate = limit if live.slowest_rate is None else min(live.slowest_rate, limit)

    @rule(name=st.sampled_from(QUEUES), secrets=st.sampled_from(ROLL))
    def roll_signing_secret(self, name: str, secrets: tuple[str, ...]) -> None:
        """A step of a key rotation (or a start or end of signing): the queue's last PUT again (its window, breaker
        and flow control kept: a PUT replaces every setting), with these secrets (none: an explicit null, as a PUT
        without them keeps them)."""
        live = self.reference.live(name)
        if live is None:
            return
        doc = {key: value for key, value in self.settings[name].items() if not key.startswith("signing_secret")}
        doc.update(zip(("signing_secret", "signing_secret_next"), secrets or (None,), strict=False))
        status, answer = self.call("PUT", f"/v1/queues/{name}", doc)
        assert status == 200, answer
        assert (answer["signing_secret_set"], answer["signing_secret_next_set"]) == (len(secrets) > 0, len(secrets) > 1)
        live.secrets = secrets

    @rule(name=st.sampled_from(QUEUES), crash_at=st.sampled_from((None, None, 1, 2, 3)))
    def delete_queue(self, name: str, crash_at: int | None) -> None:
        def delete() -> None:
            status, _ = self.call("DELETE", f"/v1/queues/{name}")
            assert status in (204, 404)

        self.act(crash_at, delete)
        self.sync(name)

    @rule(name=st.sampled_from(QUEUES), crash_at=st.sampled_from((None, None, 1, 2)))
    def queue_gets_busy(self, name: str, crash_at: int | None) -> None:
        """A queue's window record reaches SPREAD_AT as a process adds its tally: its new messages are spread over
        partitions from then on (`core/message_partitions.py`), beside those stored before in its own."""
        ctx = self.world.h.ctx
        queue = ctx.store.get_queue(name, consistent=True)
        if queue is None:
            return
        now = self.world.clock()
        ctx.store.add_to_window(name, message_partitions.window_of(now), message_partitions.SPREAD_AT)
        self.act(crash_at, lambda: ctx.spreading.took(queue, message_partitions.REPORT_AT, now))

    @rule(name=st.sampled_from(QUEUES), paused=st.booleans())
    def pause_or_resume(self, name: str, paused: bool) -> None:
        status, _ = self.call("POST", f"/v1/queues/{name}/{'pause' if paused else 'resume'}")
        assert status in (200, 404)
        live = self.reference.live(name)
        if status == 200 and live is not None:
            live.paused = paused
            live.paused_ever |= paused

    @rule(name=st.sampled_from(QUEUES), flow_key=st.sampled_from(("k1", "k2")))
    def release_key(self, name: str, flow_key: str) -> None:
        """v1.3: a key held by a failed message goes on (404 when nothing is held, or no such queue)."""
        status, doc = self.call("POST", f"/v1/queues/{name}/keys/{flow_key}/release")
        assert status in (200, 404), doc

    @rule(name=st.sampled_from(QUEUES), mode=st.sampled_from(("ok", "ok", "transient", "permanent")))
    def target_answers(self, name: str, mode: str) -> None:
        self.world.modes.setdefault(name, Modes()).target = mode
        live = self.reference.live(name)
        if live is not None and mode != "ok":
            live.target_failed_ever = True

    @rule(name=st.sampled_from(QUEUES), mode=st.sampled_from(("ok", "transient", "permanent")))
    def destination_answers(self, name: str, mode: str) -> None:
        self.world.modes.setdefault(name, Modes()).notice = mode

    # messages -----------------------------------------------------------------------------------
    @rule(
        target=messages,
        name=st.sampled_from(QUEUES),
        count=st.sampled_from((1, 2, 4, 20)),
        delay=st.sampled_from(DELAYS),
        ttl=st.sampled_from((None, None, 10, 100)),
        dedup=st.sampled_from((None, None, "d1", "d2")),
        big=st.sampled_from((False, False, False, True)),
        crash_at=st.sampled_from((None, None, None, 1, 2)),
        window=st.sampled_from(OWN_WINDOWS),
        flow_key=st.sampled_from(FLOW_KEYS),
        priority=st.sampled_from((None, None, 0, 9)),
    )
    def post(
        self,
        name: str,
        count: int,
        delay: float | None,
        ttl: float | None,
        dedup: str | None,
        big: bool,
        crash_at: int | None,
        window: Any = None,
        flow_key: str | None = None,
        priority: int | None = None,
    ) -> list[tuple[str, str]]:
        one: dict[str, Any] = {"body": BIG_BODY if big else 1}
        if window is not None:
            one["window"] = window
        if flow_key is not None:
            one["flow_key"] = flow_key
        if priority is not None:
            one["priority"] = priority
        if delay is not None:
            one["delay"] = delay
        if ttl is not None:
            one["ttl"] = ttl
        batch = [one] * (1 if big else count)
        if dedup is not None:
            batch = [{**batch[0], "dedup_id": dedup}]
        created: list[tuple[str, str]] = []

        def post() -> None:
            status, doc = self.call("POST", f"/v1/queues/{name}/messages", {"messages": batch})
            assert status in (201, 404, 413), doc
            if status == 201:
                created.extend((name, m["id"]) for m in doc["messages"])
                for m in doc["messages"]:
                    self.reference.flow.setdefault(m["id"], (flow_key, 5 if priority is None else priority))

        self.act(crash_at, post)
        live = self.reference.live(name)
        if live is not None:
            live.admitted += len(batch)
        return created

    def _message(self, picked: list[tuple[str, str]]) -> tuple[str, str] | None:
        return picked[0] if picked else None

    @rule(picked=messages, delay=st.sampled_from((0, 30, 300)), crash_at=st.sampled_from((None, None, 1, 2)))
    def patch(self, picked: list[tuple[str, str]], delay: float, crash_at: int | None) -> None:
        if not picked:
            return
        name, message_id = picked[0]

        def patch() -> None:
            status, doc = self.call("PATCH", f"/v1/queues/{name}/messages/{message_id}", {"delay": delay})
            assert status in (200, 404, 409), doc

        self.act(crash_at, patch)

    @rule(picked=messages, crash_at=st.sampled_from((None, None, 1, 2)))
    def deliver_now(self, picked: list[tuple[str, str]], crash_at: int | None) -> None:
        """v1.2: a pending message becomes due now (PATCH {"delay": 0}); anything else is a 409."""
        if not picked:
            return
        name, message_id = picked[0]

        def deliver_now() -> None:
            status, doc = self.call("POST", f"/v1/queues/{name}/messages/{message_id}/deliver-now")
            assert status in (200, 404, 409), doc
            if status == 200 and (doc["status"], doc["next_attempt_at"]) != ("pending", self._opening(name, doc)):
                self.reference.violate("rule 2", f"deliver-now left {name}/{message_id} {doc['status']}: {doc}")

        self.act(crash_at, deliver_now)

    def _opening(self, name: str, doc: dict[str, Any]) -> str | None:
        """The `next_attempt_at` a message due now shows: none, or the next opening of its window (its own, else its
        queue's) when that is closed now: due now never means outside a window."""
        live = self.reference.live(name)
        window = validation.window(doc["window"]) or (live.window if live is not None else None)
        now = self.world.clock()
        if window is None or window.is_open(now):
            return None
        return format_rfc3339(window.next_open(now))

    @rule(name=st.sampled_from(QUEUES), status=st.sampled_from((None, "pending", "delivered")))
    def list_by_due(self, name: str, status: str | None) -> None:
        """v1.2: `order=due` lists what the unordered list lists (with the same filter), earliest due first."""
        plain_params = {"limit": "1000", **({"status": status} if status else {})}
        path = f"/v1/queues/{name}/messages"
        answer, ordered = self.world.h.call("GET", path, params={**plain_params, "order": "due"})
        _, plain = self.world.h.call("GET", path, params=plain_params)
        if answer != 200 or ordered["next_cursor"] or plain["next_cursor"]:
            return
        dues = [m["due_at"] for m in ordered["messages"]]
        if dues != sorted(dues):
            self.reference.violate("rule 1", f"{name} order=due is not in due order: {dues}")
        if {m["id"] for m in ordered["messages"]} != {m["id"] for m in plain["messages"]}:
            self.reference.violate("rule 1", f"{name} order=due lists other messages than the unordered list")

    @rule(picked=messages, crash_at=st.sampled_from((None, None, 1)))
    def cancel(self, picked: list[tuple[str, str]], crash_at: int | None) -> None:
        if not picked:
            return
        name, message_id = picked[0]

        def cancel() -> None:
            status, doc = self.call("DELETE", f"/v1/queues/{name}/messages/{message_id}")
            assert status in (204, 404, 409), doc

        self.act(crash_at, cancel)

    @rule(picked=messages, crash_at=st.sampled_from((None, None, 1, 2, 3)))
    def redeliver(self, picked: list[tuple[str, str]], crash_at: int | None) -> None:
        if not picked:
            return
        name, message_id = picked[0]

        def redeliver() -> None:
            status, doc = self.call("POST", f"/v1/queues/{name}/messages/{message_id}/redeliver", rule="rule 2")
            assert status in (200, 404, 409), doc
            live = self.reference.live(name)
            if status == 200 and live is not None:
                live.admitted += 1

        self.act(crash_at, redeliver)

    @rule(
        name=st.sampled_from(QUEUES),
        action=st.sampled_from(ACTIONS),
        seconds=st.sampled_from((-300, 60, 600)),
        crash_at=st.sampled_from((None, None, 1, 2)),
    )
    def bulk(self, name: str, action: str, seconds: int, crash_at: int | None) -> None:
        doc: dict[str, Any] = {"action": action, "filter": {}}
        if action == "shift":
            doc["seconds"] = seconds

        def start() -> None:
            status, answer = self.call("POST", f"/v1/queues/{name}/operations", doc)
            assert status in (202, 404), answer

        self.act(crash_at, start)

    @rule(name=st.sampled_from(QUEUES), crash_at=st.sampled_from((None, None, 1, 2)))
    def purge(self, name: str, crash_at: int | None) -> None:
        """The console's purge: one bulk cancel of every pending message."""

        def start() -> None:
            doc = {"action": "cancel", "filter": {"status": "pending"}}
            status, answer = self.call("POST", f"/v1/queues/{name}/operations", doc)
            assert status in (202, 404), answer

        self.act(crash_at, start)

    # schedules ----------------------------------------------------------------------------------
    @rule(
        name=st.sampled_from(QUEUES),
        schedule=st.sampled_from(SCHEDULES),
        every=st.sampled_from((60, 300)),
        big=st.sampled_from((False, False, False, True)),
        crash_at=st.sampled_from((None, None, 1, 2)),
        catch_up=st.sampled_from(("skip", "latest", "all")),
        jitter=st.sampled_from((0, 0, 90)),
    )
    def put_schedule(
        self,
        name: str,
        schedule: str,
        every: int,
        big: bool,
        crash_at: int | None,
        catch_up: str = "skip",
        jitter: int = 0,
    ) -> None:
        body = {"every": every, "body": BIG_BODY if big else {"s": schedule}, "catch_up": catch_up, "jitter": jitter}

        def put() -> None:
            status, doc = self.call("PUT", f"/v1/queues/{name}/schedules/{schedule}", body)
            assert status in (200, 201, 404, 413), doc
            live = self.reference.live(name)
            if status in (200, 201) and live is not None:
                live.schedules.setdefault(schedule, False)
            if live is not None and catch_up == "all":
                live.catch_up_all.add(schedule)

        if self.act(crash_at, put):
            self._sync_schedule(name, schedule)

    def _sync_schedule(self, name: str, schedule: str) -> None:
        live = self.reference.live(name)
        if live is None:
            return
        stored = self.world.h.ctx.store.get_schedule(name, schedule)
        if stored is None:
            live.schedules.pop(schedule, None)
        else:
            live.schedules[schedule] = stored.paused

    @rule(name=st.sampled_from(QUEUES), schedule=st.sampled_from(SCHEDULES), crash_at=st.sampled_from((None, None, 1)))
    def delete_schedule(self, name: str, schedule: str, crash_at: int | None) -> None:
        def delete() -> None:
            status, doc = self.call("DELETE", f"/v1/queues/{name}/schedules/{schedule}")
            assert status in (204, 404), doc

        self.act(crash_at, delete)
        self._sync_schedule(name, schedule)

    @rule(name=st.sampled_from(QUEUES), schedule=st.sampled_from(SCHEDULES), paused=st.booleans())
    def pause_schedule(self, name: str, schedule: str, paused: bool) -> None:
        status, doc = self.call("POST", f"/v1/queues/{name}/schedules/{schedule}/{'pause' if paused else 'resume'}")
        assert status in (200, 404), doc
        self._sync_schedule(name, schedule)

    # the service runs and time ----------------------------------------------------------------------
    @rule(seconds=st.sampled_from((1, 10, 60, 200, 700)))
    def time_passes(self, seconds: float) -> None:
        self.world.run_for(seconds)

    @rule(crash_at=st.sampled_from((1, 2, 3, 5)))
    def dispatcher_dies(self, crash_at: int) -> None:
        visible = self.world.visible()
        if visible:
            self.world.crashing(crash_at, lambda: self.world.dispatch(visible[0]))

    @rule(crash_at=st.sampled_from((1, 2, 4)))
    def sweeper_dies(self, crash_at: int) -> None:
        self.world.crashing(crash_at, self.world.sweep)

    @rule()
    def sweeps_overlap(self) -> None:
        self.world.overlapping_sweeps()

    @rule()
    def dead_letter_consumer(self) -> None:
        self.world.dead_letters()

    # single and bulk twins ------------------------------------------------------------------------
    @rule(action=st.sampled_from(ACTIONS), attempts=st.integers(1, 3), failures=st.integers(0, 4))
    def single_and_bulk_agree(self, action: str, attempts: int, failures: int) -> None:
        """Two fresh queues live the same story; one gets the single-message action, the other the bulk one."""
        self.twins += 1
        names = (f"single{self.twins}", f"bulk{self.twins}")
        delay = 0 if action == "redeliver" else 600
        ids = []
        for name in names:
            self.call("PUT", f"/v1/queues/{name}", queue_doc(self.world, name, "http", None, None, attempts))
            stored = self.world.h.ctx.store.get_queue(name, consistent=True)
            assert stored is not None
            self.reference.generations.append(Generation(name, stored.created_at, max_attempts=attempts))
            self.reference.generations[-1].target_failed_ever = True
            self.world.modes[name] = Modes(script=[503] * failures)
            # Keyed, so that both twins must keep the key and priority through the action (v1.2).
            one = {"body": 1, "delay": delay, "flow_key": "twin", "priority": 7}
            _, doc = self.call("POST", f"/v1/queues/{name}/messages", {"messages": [one]})
            ids.append(doc["messages"][0]["id"])
        self.world.run_for(120)
        single, bulk = names
        before = self.call("GET", f"/v1/queues/{single}/messages/{ids[0]}")[1]
        if action == "redeliver" and before["status"] not in ("failed", "expired"):
            return  # bulk redeliver applies to failed and expired messages only (the contract)
        if action == "cancel":
            self.call("DELETE", f"/v1/queues/{single}/messages/{ids[0]}")
        elif action == "redeliver":
            self.call("POST", f"/v1/queues/{single}/messages/{ids[0]}/redeliver", rule="rule 2")
        else:
            self.call("PATCH", f"/v1/queues/{single}/messages/{ids[0]}", {"delay": 480 + 60})
        doc = {"action": action, "filter": {}, **({"seconds": 60} if action == "shift" else {})}
        self.call("POST", f"/v1/queues/{bulk}/operations", doc)
        self.world.collect()
        self.world.run_for(900)
        docs = [self.call("GET", f"/v1/queues/{name}/messages/{i}")[1] for name, i in zip(names, ids, strict=True)]
        if comparable(docs[0]) != comparable(docs[1]):
            self.reference.violate(
                "rule 2",
                f"single and bulk {action} differ (max_attempts {attempts}, {failures} x 503 first): "
                f"{comparable(docs[0])} vs {comparable(docs[1])}",
            )
        for name in names:
            self.call("DELETE", f"/v1/queues/{name}")
            self.sync(name)

    # invariants ---------------------------------------------------------------------------------
    @invariant()
    def schedules_belong_to_their_queue(self) -> None:
        listed = {}
        for name in QUEUES:
            status, doc = self.world.h.call("GET", f"/v1/queues/{name}/schedules")
            if status == 200:
                listed[name] = [s["name"] for s in doc["schedules"]]
        self.reference.check_schedules(listed)

    @invariant()
    def only_a_breaker_pauses_a_queue_by_itself(self) -> None:
        """A queue may pause itself (its circuit breaker tripped): the model learns it as a pause, and only a
        queue that had a breaker may do so."""
        store = self.world.h.ctx.store
        for name in QUEUES:
            live = self.reference.live(name)
            control = delivery_control.of(store.get_queue(name, consistent=True))
            if live is None or not control.paused or live.paused:
                continue
            if control.paused_reason != "circuit_breaker" or not live.breaker_ever:
                self.reference.violate("rule 2", f"{name} paused itself ({control.paused_reason}) without a breaker")
            live.paused = live.paused_ever = True
            live.paused_notice_owed |= live.destination is not None

    @invariant()
    def transitions_are_legal(self) -> None:
        for illegal in self.world.checker.illegal:
            self.reference.violate("rule 2", f"illegal transition {illegal}")

    def check_schedules_run(self) -> None:
        """Every running schedule of a running queue has its next occurrence pending (or on its way). A
        paused queue's sweep repairs no chain (its held occurrence chains when delivered): a schedule whose
        PUT died before its first occurrence gets it from the repair after the resume."""
        store = self.world.h.ctx.store
        for generation in self.reference.generations:
            if not generation.alive or delivery_control.of(store.get_queue(generation.name, consistent=True)).paused:
                continue
            for name in generation.schedules:
                schedule = store.get_schedule(generation.name, name)
                if schedule is None or schedule.paused:
                    continue
                found, _ = store.list_messages(generation.name, status=None, limit=1000, cursor=None, schedule=name)
                live = [m for m in found if m.status in (Status.PENDING, Status.DELIVERING) and is_current(schedule, m)]
                if not live:
                    self.reference.violate("rule 4", f"{generation.name}/{name} is running but has no next occurrence")

    def finish(self) -> None:
        """The end of the story: faults healed, destinations reachable again, time enough for everything."""
        for modes in self.world.modes.values():
            if modes.notice == "transient":
                modes.notice = "ok"
        self.release_held_keys()
        self.world.run_for(DRAIN_SECONDS, step_limit=3000)
        self.world.read_sqs()
        messages = self.world.messages()
        self.reference.check_messages(messages, self.world.clock(), self.world.verdicts())
        self.reference.check_responses(messages, REPLY.decode())
        self.check_schedules_run()
        self.reference.check_queue_notices()
        self.reference.check_stretches(messages)

    def release_held_keys(self) -> None:
        """Held keys (ordering with on_failure hold) are released before the drain: a hold waits for a person."""
        store = self.world.h.ctx.store
        for generation in self.reference.generations:
            if not generation.alive or not generation.ordered_ever:
                continue
            for flow_key, state in store.key_orders(generation.name):
                if state.held:
                    ordered.release(self.world.h.ctx, generation.name, flow_key, self.world.clock())

    def teardown(self) -> None:
        try:
            self.finish()
            report = os.environ.get("HOURGLASS_MODEL_REPORT")
            if report and self.reference.violations:
                # A census of every hole a run meets (each example's list), for hunting: the run goes on.
                with open(report, "a") as out:
                    out.write("\n".join(self.reference.violations) + "\n---\n")
                return
            assert self.reference.violations == [], "\n".join(self.reference.violations)
        finally:
            core_ordering.INLINE = self.inline
            self.world.close()


SystemModel.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=not RANDOM,
    phases=list(Phase) if SHRINK else [Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
test_system_model = SystemModel.TestCase
