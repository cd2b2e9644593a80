"""The crash switch (HOURGLASS_CRASH_AT): attempts stop at a phase, then the local runtime is SIGKILLed.

For the crash benchmark (bench/crash.py): every attempt that reaches the phase stays there, so the kill
finds them all mid-flight in it, with nothing cleaned up, as when a host dies.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from hourglass.logs import log
from hourglass.service.context import Context


class _Switch:
    def __init__(self, phase: str, after: float) -> None:
        self.phase = phase
        self.after = after
        self._lock = threading.Lock()
        self._fired = False

    def reached(self, phase: str) -> None:
        """At `phase` of an attempt: the switch's phase stops the attempt for good (the kill ends it)."""
        if phase != self.phase:
            return
        with self._lock:
            if not self._fired:
                self._fired = True
                log("crash_armed", phase=phase, kill_in_s=self.after)
                threading.Timer(self.after, os.kill, (os.getpid(), signal.SIGKILL)).start()
        threading.Event().wait()


def arm(ctx: Context, phase: str, after: float) -> None:
    """Wraps the begin write (received: before it, begun: after it) and the HTTP request (delivered:
    after it) of the runtime's context."""
    switch = _Switch(phase, after)
    begin, post = ctx.store.begin_delivery, ctx.post

    def begin_delivery(*args: Any, **kwargs: Any) -> Any:
        switch.reached("received")
        message = begin(*args, **kwargs)
        switch.reached("begun")
        return message

    def delivered(*args: Any, **kwargs: Any) -> Any:
        reply = post(*args, **kwargs)
        switch.reached("delivered")
        return reply

    ctx.store.begin_delivery = begin_delivery  # type: ignore[method-assign]
    ctx.post = delivered
