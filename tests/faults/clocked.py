"""The local runtime on a clock the test moves forward, optionally killed mid-chain (`python -m tests.faults.clocked`).

`HOURGLASS_CLOCK_FILE` holds the clock's offset from real time (seconds), so a restarted runtime keeps
the test's time. `HOURGLASS_KILL_CHAIN` = `before_next` / `after_next` sends SIGKILL to the process the
first time an occurrence chains (after its outcome), before (or after) the next occurrence is stored.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hourglass.core.model import Message
from hourglass.service import transitions
from hourglass.service.context import Context
from hourglass.service.transitions import Chained

from devstack.config import RuntimeConfig
from devstack.runtime import Runtime


@dataclass(frozen=True)
class MovableClock:
    """Real time plus an offset kept in a file: it runs at real speed and only ever jumps forward."""

    path: Path

    def offset(self) -> float:
        try:
            return float(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return 0.0

    def __call__(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset())

    def jump_to(self, instant: datetime) -> None:
        offset = (instant - datetime.now(UTC)).total_seconds()
        if offset < self.offset():
            raise ValueError(f"the clock only moves forward ({instant.isoformat()} is past)")
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(repr(offset))
        temporary.replace(self.path)


class ClockedRuntime(Runtime):
    """The in-process runtime with every service reading `clock`."""

    clock: MovableClock

    def _build_context(self, endpoint: str) -> Context:
        # The API, dispatcher and sweeper share this one context.
        context = super()._build_context(endpoint)
        context.clock = self.clock
        return context


def kill_in_chain(point: str, marker: Path) -> None:
    """SIGKILL this process in the first occurrence's chaining, at `point`; the marker stops it recurring."""
    chain = transitions.chain

    def dying_chain(ctx: Context, message: Message, now: datetime, read: Chained | None = None) -> Message | None:
        first = message.schedule is not None and not marker.exists()
        if first:
            marker.write_text(message.id)
        if first and point == "before_next":
            os.kill(os.getpid(), signal.SIGKILL)
        stored = chain(ctx, message, now, read)
        if first and point == "after_next":
            os.kill(os.getpid(), signal.SIGKILL)
        return stored

    transitions.chain = dying_chain


def main() -> int:
    clock_file = Path(os.environ["HOURGLASS_CLOCK_FILE"])
    point = os.environ.get("HOURGLASS_KILL_CHAIN")
    if point:
        kill_in_chain(point, clock_file.with_suffix(".killed"))
    runtime = ClockedRuntime(RuntimeConfig.from_env())
    runtime.clock = MovableClock(clock_file)
    runtime.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("hourglass: ready (clocked)", flush=True)
    stop.wait()
    runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
