"""`python -m devstack [--fresh]`: runs the whole stack locally until Ctrl-C or SIGTERM (HOURGLASS_DEPLOY=cdk:
deployed). The embedded emulator keeps its state in .hourglass/state across restarts; `--fresh` starts empty."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.runtime import CACHE, Runtime

# Where `make dev` keeps the emulator's state unless HOURGLASS_STATE names another file ("off": none).
STATE_FILE = CACHE / "state" / "emulator.pickle"


def with_state(config: RuntimeConfig, env: Mapping[str, str], fresh: bool) -> RuntimeConfig:
    """`config` keeping the embedded emulator's state in STATE_FILE (or HOURGLASS_STATE's file), emptied
    first when `fresh`; in memory only with HOURGLASS_STATE=off or an external emulator."""
    chosen = env.get("HOURGLASS_STATE", "")
    if chosen.lower() == "off" or config.endpoint_url:
        return replace(config, state_file=None)
    state = config.state_file if chosen else STATE_FILE
    if fresh and state is not None:
        state.unlink(missing_ok=True)
    return replace(config, state_file=state)


def state_line(config: RuntimeConfig, fresh: bool) -> str:
    if config.endpoint_url:
        return "  state           kept by the external emulator"
    if config.state_file is None:
        return "  state           in memory only (HOURGLASS_STATE=off): a restart starts empty"
    shown = os.path.relpath(config.state_file) if config.state_file.is_absolute() else str(config.state_file)
    if fresh:
        return f"  state           started empty (FRESH=1); kept in {shown} across restarts"
    return f"  state           kept in {shown} across restarts (`make dev FRESH=1` starts empty)"


def start_inprocess(config: RuntimeConfig) -> tuple[Runtime, list[str]]:
    print("hourglass: starting (emulator, CDK synth + deploy, API, sweeper, pollers)...", flush=True)
    runtime = Runtime(config)
    try:
        runtime.start()
    except BaseException:
        runtime.stop()
        raise
    assert runtime.emulator is not None and runtime.settings is not None
    return runtime, [
        f"  console         {runtime.api_url}/console",
        f"  REST API        {runtime.api_url}   (GET /health)",
        f"  AWS emulator    {runtime.emulator.endpoint_url}" + ("" if runtime.emulator.embedded else "   (external)"),
        f"  table           {runtime.settings.table}",
        f"  timer queue     {runtime.settings.timer_queue_url}",
        f"  timer DLQ       {runtime.outputs.get('TimerDlqUrl', '?')}",
        f"  sweep interval  {config.sweep_interval:g} s, lookahead {config.lookahead:g} s",
    ]


def start_deployed(config: RuntimeConfig) -> tuple[DeployedStack, list[str]]:
    print("hourglass: starting (MiniStack, cdk bootstrap, cdk deploy; the Lambdas run in MiniStack)...", flush=True)
    stack = DeployedStack(config).start()
    outputs = stack.outputs
    timings = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in stack.timings.items())
    return stack, [
        f"  console         {stack.api_url}/console   (paste the API key into its key field)",
        f"  REST API        {stack.api_url}   (GET /health)",
        f"  API key         {stack.api_key}   (header x-api-key)",
        f"  AWS emulator    {stack.endpoint_url}" + ("   (MiniStack)" if stack.emulator else "   (external)"),
        f"  table           {outputs.get('TableName', '?')}",
        f"  timer queue     {outputs.get('TimerQueueUrl', '?')}",
        f"  timer DLQ       {outputs.get('TimerDlqUrl', '?')}",
        f"  functions       {outputs.get('IngestFunctionName')}, {outputs.get('SweeperFunctionName')}, "
        f"{outputs.get('DispatcherFunctionName')}",
        f"  sweep           EventBridge rate(1 minute), lookahead {config.lookahead:g} s",
        f"  start-up        {timings}",
        '  try:            curl -H "x-api-key: $KEY" ' + stack.api_url + "/health",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    parser.add_argument("--fresh", action="store_true", help="start empty: forget the saved state")
    args = parser.parse_args(argv)
    config = RuntimeConfig.from_env()
    started = time.monotonic()
    running: Runtime | DeployedStack
    try:
        if config.deploy == "cdk":
            running, lines = start_deployed(config)
        else:
            config = with_state(config, os.environ, args.fresh)
            running, lines = start_inprocess(config)
            lines.append(state_line(config, args.fresh))
    except Exception as exc:
        print(f"hourglass: failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"hourglass: ready in {time.monotonic() - started:.1f} s", flush=True)
    print("\n".join([*lines, "  Ctrl-C stops everything started here."]), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("hourglass: stopping...", flush=True)
    running.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
