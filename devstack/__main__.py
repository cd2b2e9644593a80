"""`python -m devstack`: runs the whole stack locally until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
import time

from devstack.config import RuntimeConfig
from devstack.runtime import Runtime


def main() -> int:
    config = RuntimeConfig.from_env()
    started = time.monotonic()
    print("hourglass: starting (emulator, CDK synth + deploy, API, sweeper, pollers)...", flush=True)
    runtime = Runtime(config)
    try:
        runtime.start()
    except Exception as exc:
        print(f"hourglass: failed to start: {exc}", file=sys.stderr, flush=True)
        runtime.stop()
        return 1
    assert runtime.emulator is not None and runtime.settings is not None
    lines = [
        f"hourglass: ready in {time.monotonic() - started:.1f} s",
        f"  REST API        {runtime.api_url}   (GET /health)",
        f"  AWS emulator    {runtime.emulator.endpoint_url}" + ("" if runtime.emulator.embedded else "   (external)"),
        f"  table           {runtime.settings.table}",
        f"  timer queue     {runtime.settings.timer_queue_url}",
        f"  timer DLQ       {runtime.outputs.get('TimerDlqUrl', '?')}",
        f"  sweep interval  {config.sweep_interval:g} s, lookahead {config.lookahead:g} s",
        "  Ctrl-C stops everything started here.",
    ]
    print("\n".join(lines), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("hourglass: stopping...", flush=True)
    runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
