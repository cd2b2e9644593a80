"""The crash switch (HOURGLASS_CRASH_AT): attempts stop at a phase, then the local runtime is SIGKILLed.

For the crash benchmark (bench/crash.py): every attempt that reaches the phase stays there, so the kill
finds them all mid-flight in it, with nothing cleaned up, as when a host dies. (The deployed dispatcher's
switch, `hourglass.service.crash_switch`, exits at once instead.)
"""

from __future__ import annotations

import os
import signal
import threading

from hourglass.logs import log
from hourglass.service import crash_switch
from hourglass.service.context import Context


class _Switch:
    def __init__(self, phase: str, after: float) -> None:
        self.phase = phase
        self.after = after
        self._lock = threading.Lock()
        self._fired = False

    def reached(self, phase: str, _: object) -> None:
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
    """Every attempt of the runtime's context stops at `phase` (`crash_switch.wrap`)."""
    crash_switch.wrap(ctx, _Switch(phase, after).reached)
