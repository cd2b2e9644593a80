"""Priority across processes: a higher priority handed off by a process that never saw the backlog (another
ingest container, a sweeper) takes its slots from the scope's record of who holds them (`core.holders`)."""

from __future__ import annotations

import dataclasses
import itertools
import threading

from hourglass.core.pacing import Held, Rates, Slot, Start, item_at
from hourglass.core.timestamps import from_ms, to_ms
from hourglass.service.rest import Api
from hourglass.service.sweep import Sweeper

from tests.integration import test_rate_limits as limits
from tests.integration.conftest import Harness
from tests.integration.test_flow_keys import post_keyed, post_low_then_high


def another_process(h: Harness) -> Harness:
    """The same table and queues, with a pacer and memory of its own (a second Lambda container)."""
    ctx = dataclasses.replace(h.ctx)
    return dataclasses.replace(h, ctx=ctx, api=Api(ctx))


def test_a_high_priority_posted_to_another_process_starts_before_the_backlogs_far_slots(harness: Harness) -> None:
    """Rate 1: the ten low ones' first three slots are nearer than the margin and keep them; the three high
    ones, posted to another process, take the following three and start next."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "ranked", rate_limit=1)
    post_low_then_high(harness, "ranked", None, another_process(harness))
    limits.drain(harness)
    assert [body["p"] for _, body in recorder.starts] == [1] * 3 + [9] * 3 + [1] * 7
    assert limits.over_bound([at for at, _ in recorder.starts], 1) == []


def test_a_keys_high_priority_posted_to_another_process_starts_next(harness: Harness) -> None:
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "keyed", flow_control={"key_rate_limit": 1, "key_max_concurrency": 1})
    post_low_then_high(harness, "keyed", "t", another_process(harness))
    limits.drain(harness)
    assert [body["p"] for _, body in recorder.starts] == [1] * 3 + [9] * 3 + [1] * 7
    assert limits.over_bound([at for at, _ in recorder.starts], 1) == []


def test_a_sweeper_that_never_saw_the_backlog_gives_its_high_priority_a_backlogs_slot(harness: Harness) -> None:
    """Rate 0.1 (slots 10.25 s apart from 1 s ahead), a 90 s look-ahead: sixteen low posted due now hold slots up
    to ~155 s ahead; three high due just beyond ingest's hand-off window are handed off by another process's
    sweep and take the slots of the first low ones at or after their due time."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    harness.ctx.settings = dataclasses.replace(harness.ctx.settings, lookahead=90)
    limits.make_queue(harness, "swept", rate_limit=0.1)
    timing, now_ms = harness.ctx.settings.timing, to_ms(harness.clock())
    due_high = now_ms + int((timing.sweep_ahead + timing.safety + 1) * 1000)
    post_keyed(harness, "swept", [(None, 1)] * 16, now_ms)
    post_keyed(harness, "swept", [(None, 9)] * 3, due_high)
    sweep_at = now_ms + int((timing.safety + 1.2) * 1000)
    timers = harness.timers()
    harness.dispatch([t for t in timers if t["json"]["due"] < sweep_at])  # the low ones due by then start
    for later in (t for t in timers if t["json"]["due"] >= sweep_at):
        harness.sqs.send_message(QueueUrl=harness.ctx.settings.timer_queue_url, MessageBody=later["body"])
    harness.clock.now = from_ms(sweep_at)
    Sweeper(another_process(harness).ctx).run()
    limits.drain(harness, rounds=60)
    ahead = -(-(due_high - now_ms - 1000) // 10_250)  # the low ones whose slots are before the high ones' due
    assert ahead < 16
    assert [body["p"] for _, body in recorder.starts] == [1] * ahead + [9] * 3 + [1] * (16 - ahead)


def test_a_batch_is_not_dealt_again_once_a_higher_priority_took_one_of_its_slots(harness: Harness) -> None:
    """Two slots handed out to x and y; another process gives y's to a higher priority; the first process's
    re-deal of its batch (too near at the send) is refused, so y's old slot goes to no one else."""
    mine, theirs, rates = harness.ctx.pacer, another_process(harness).ctx.pacer, Rates(1.0)
    now = harness.clock()
    starts = [Start(to_ms(now), None, 1, ("x", 1)), Start(to_ms(now), None, 1, ("y", 1))]
    slots = mine.scoped_slots("q", rates, starts, now)
    moving = [Held(slot, "", 1, name, 1) for slot, name in zip(slots, "xy", strict=True)]
    fresh = Slot(to_ms(now) + 60_000, to_ms(now) + 60_250)
    for at in (slots[1].start_ms, fresh.start_ms):
        theirs.read("q", item_at(None, 1.0, at * 1000))
    high = Held(slots[1], "", 9, "high", 1)
    swap = theirs.swap("q", rates, moving[1], high, fresh)
    assert swap.fences
    for fence in swap.fences:
        harness.ddb.update_item(**fence)
    assert mine.redeal("q", rates, moving, [Start(to_ms(now))], now) is None


def test_a_re_deal_takes_its_batchs_slots_off_the_record(harness: Harness) -> None:
    pacer, rates, now = harness.ctx.pacer, Rates(1.0), harness.clock()
    starts = [Start(to_ms(now), None, 1, ("x", 1)), Start(to_ms(now), None, 1, ("y", 1))]
    slots = pacer.scoped_slots("q", rates, starts, now)
    moving = [Held(slot, "", 1, name, 1) for slot, name in zip(slots, "xy", strict=True)]
    fresh = pacer.redeal("q", rates, moving, [Start(to_ms(now))], now)
    for slot in slots:
        pacer.read("q", item_at(None, 1.0, slot.start_ms * 1000))
    span = (min(s.start_ms for s in slots), max(s.start_ms for s in slots) + 1)
    assert (fresh is not None, pacer.holders("q", rates, [""], *span)) == (True, [])


def test_the_process_that_handed_off_a_deep_backlog_refills_the_record_as_its_first_slots_pass(
    harness: Harness,
) -> None:
    """Rate 1 (slots 1.25 s apart): forty low hold slots up to ~50 s ahead, more than the record holds. 30 s later
    one more low goes through the same process, whose notes refill the record; three high posted to another
    process then take the first low slots 4 s ahead, not slots at the end of the line."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "deep", rate_limit=1)
    now_ms = to_ms(harness.clock())
    post_keyed(harness, "deep", [(None, 1)] * 40, now_ms)
    later_ms = now_ms + 30_000
    timers = harness.timers()
    harness.dispatch([t for t in timers if t["json"]["due"] < later_ms - 2_000])
    for rest in (t for t in timers if t["json"]["due"] >= later_ms - 2_000):
        harness.sqs.send_message(QueueUrl=harness.ctx.settings.timer_queue_url, MessageBody=rest["body"])
    harness.clock.now = from_ms(later_ms)
    post_keyed(harness, "deep", [(None, 1)], later_ms)
    post_keyed(another_process(harness), "deep", [(None, 9)] * 3, later_ms)
    limits.drain(harness)
    # The low slots nearer than the margin (the first one a hand-off lead after the post, then 1.25 s apart).
    before = sum(1_000 + 1250 * k < later_ms - now_ms + 4_000 for k in range(40))
    assert [body["p"] for _, body in recorder.starts] == [1] * before + [9] * 3 + [1] * (41 - before)


def test_processes_giving_way_at_once_never_share_a_slot(harness: Harness) -> None:
    """Rate 2 (slots 0.5 s apart): twenty low from one process, then three processes at once each posting three
    high of priorities 7, 8 and 9 (each gives way from the same record). Every message starts once, no two starts
    share a slot (each a spacing from the next), and every high one starts before the fourteen low ones at least
    the margin ahead (a high one that gave way to a higher one never goes behind them)."""
    recorder = limits.Recorder(harness)
    harness.ctx.post = recorder
    limits.make_queue(harness, "contended", rate_limit=2)
    now_ms = to_ms(harness.clock())
    post_keyed(harness, "contended", [(None, 1)] * 20, now_ms)
    others = [another_process(harness) for _ in range(3)]
    threads = [
        threading.Thread(target=post_keyed, args=(other, "contended", [(None, 7 + n)] * 3, now_ms))
        for n, other in enumerate(others)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    limits.drain(harness, rounds=40)
    starts = sorted(at for at, _ in recorder.starts)
    assert (len(starts), len({(body["p"], body["i"]) for _, body in recorder.starts})) == (29, 29)
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 500
    high_last = max(at for at, body in recorder.starts if body["p"] >= 7)
    assert sum(at > high_last for at, body in recorder.starts if body["p"] == 1) >= 14
