"""The service context builds its hand-off once, and again only when a part the hand-off is built from changes."""

from __future__ import annotations

from dataclasses import replace

from hourglass.adapters.sqs_target import SqsTargets
from hourglass.adapters.store import Store
from hourglass.adapters.timer_queue import TimerQueue
from hourglass.service.context import Context
from hourglass.settings import Settings


def context() -> Context:
    settings = Settings(table="messages", timer_queue_url="http://127.0.0.1/timers")
    clients = object()  # never called: building the context and its hand-off sends nothing
    return Context(
        settings=settings,
        store=Store(settings.table, client=clients),
        timers=TimerQueue(settings.timer_queue_url, client=clients),
        targets=SqsTargets(client=clients),
    )


def test_the_hand_off_is_built_once() -> None:
    ctx = context()
    assert ctx.handoff is ctx.handoff


def test_new_settings_give_a_hand_off_with_their_timing() -> None:
    ctx = context()
    before = ctx.handoff
    ctx.settings = replace(ctx.settings, lookahead=900.0)
    assert ctx.handoff is not before
    assert ctx.handoff.timing == ctx.settings.timing


def test_a_copy_of_the_context_has_a_hand_off_of_its_own() -> None:
    ctx = context()
    again = replace(ctx)
    assert again.handoff is not ctx.handoff
    assert again.handoff.pacer is again.pacer
