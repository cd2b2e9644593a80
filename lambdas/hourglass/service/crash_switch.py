"""The crash switch (HOURGLASS_CRASH_AT): an attempt reaching a phase (received, begun, delivered) is where its
dispatcher dies, as a Lambda invocation killed mid-batch (a timeout, a lost host). Off unless the variable is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core.model import JSON, Message
from hourglass.logs import log
from hourglass.service.context import Context


class StorageUsed(storage.Messages, storage.MessageChanges, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


# The body field that marks a message whose first attempt kills its dispatcher (when the switch is armed).
MARK = "hourglass_crash"
# Called at each phase of every attempt with a test (read only when needed): is this the first attempt of a
# marked message?
Reached = Callable[[str, Callable[[], bool]], None]


def wrap(ctx: Context, reached: Reached) -> None:
    """Wraps the context's begin write (received: before it, begun: after it) and HTTP request (delivered:
    after it) so that `reached` sees every attempt at each phase."""
    begin, post = ctx.store.begin_delivery, ctx.post

    def begin_delivery(queue: str, message_id: str, *args: Any, **kwargs: Any) -> Message:
        reached("received", lambda: _first_marked(ctx.store.get_message(queue, message_id), 0))
        message = begin(queue, message_id, *args, **kwargs)
        reached("begun", lambda: _first_marked(message, 1))
        return message

    def delivered(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> Any:
        reply = post(url, body, headers, **kwargs)
        reached("delivered", lambda: headers.get("Hourglass-Attempt") == "1" and _marked(_json(body)))
        return reply

    ctx.store.begin_delivery = begin_delivery  # type: ignore[method-assign]
    ctx.post = delivered


def arm(ctx: Context, phase: str) -> None:
    """The dispatcher process exits at `phase` of the first attempt of a message whose body is an object with
    `"hourglass_crash": true`, every batch-mate with it; the attempts after it go on. At `received` nothing is
    written, so the message's next attempt is still its first: switch it off before its timer comes back."""

    def reached(at: str, first_marked: Callable[[], bool]) -> None:
        if at == phase and first_marked():
            log("crash_switch", phase=at)
            os._exit(1)

    wrap(ctx, reached)


def _first_marked(message: Message | None, attempts: int) -> bool:
    return message is not None and message.attempts == attempts and _marked(message.body)


def _marked(body: JSON) -> bool:
    return isinstance(body, dict) and body.get(MARK) is True


def _json(raw: bytes) -> JSON:
    try:
        return json.loads(raw)
    except ValueError:
        return None
