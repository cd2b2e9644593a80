"""`python -m devstack`: runs the whole stack locally until Ctrl-C or SIGTERM (HOURGLASS_DEPLOY=cdk: deployed)."""

from __future__ import annotations

import signal
import sys
import threading
import time

from devstack.config import RuntimeConfig
from devstack.deployed import DeployedStack
from devstack.runtime import Runtime


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


def main() -> int:
    config = RuntimeConfig.from_env()
    started = time.monotonic()
    running: Runtime | DeployedStack
    try:
        running, lines = start_deployed(config) if config.deploy == "cdk" else start_inprocess(config)
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
