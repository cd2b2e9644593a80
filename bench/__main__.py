"""`python -m bench` (`make bench`): every target, a Markdown table each, the same as JSON in
bench/results/latest.json. `--quick` runs tiny sizes (the smoke test); `--only` picks targets.

The timing-sensitive targets (precision, whose run also yields the cost figures, then throughput and
schedules) run one after the other; sweep scaling, memory and the capacity model then run side by side, each
in a process of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hourglass import logs

from bench import (
    body_cost,
    bulk_operations,
    capacity_sim,
    circuit_breaker,
    cost,
    crash,
    delivery_limits,
    flow_keys,
    history_cost,
    loaded,
    log_bytes,
    memory,
    ordering,
    pacing_order,
    pacing_rate,
    precision,
    schedules,
    steady,
    sweep_scaling,
    throughput,
    windows,
)
from bench.report import RESULTS, Section, write, write_readme_figures
from devstack.emulator import quiet_emulator_logs, use_dummy_credentials

ORDER = (
    "precision",
    "loaded",
    "sweep_scaling",
    "cost",
    "body_cost",
    "steady",
    "history_cost",
    "delivery_limits",
    "pacing_order",
    "pacing_rate",
    "flow_keys",
    "ordering",
    "windows",
    "circuit_breaker",
    "bulk_operations",
    "throughput",
    "schedules",
    "crash",
    "memory",
    "capacity",
)
SIDE_BY_SIDE = ("sweep_scaling", "memory", "capacity")
QUICK_PRECISION = precision.PrecisionConfig(
    per_target=20, max_delay=9.0, post_window=1.0, sweep_interval=1.0, lookahead=4.0, settle=3.0
)


def side_section(name: str, quick: bool, costs: capacity_sim.Costs | None = None) -> Section:
    if name == "sweep_scaling":
        return sweep_scaling.run(sizes=(10, 100), due=20) if quick else sweep_scaling.run()
    if name == "memory":
        return memory.run(messages=1_000, sweep_batch=50) if quick else memory.run()
    return capacity_sim.section(costs, scale=0.002 if quick else 1.0)


def run_all(
    *, quick: bool = False, only: tuple[str, ...] = ORDER, out: Path | None = None, hogs: int = loaded.HOGS
) -> dict[str, Any]:
    """Runs the targets; returns the JSON document it wrote."""
    quiet_emulator_logs()
    use_dummy_credentials("us-east-1")
    started = time.time()
    sections: dict[str, Section] = {}
    timings: dict[str, float] = {}
    if {"precision", "cost", "body_cost"} & set(only):
        t = time.time()
        _starting("precision (its run also yields the cost figures)")
        try:
            section, record = precision.run(QUICK_PRECISION if quick else precision.PrecisionConfig())
            sections["precision"], sections["cost"] = section, cost.section(record)
        except Exception:
            sections["precision"], sections["cost"] = _failed("precision"), _failed("cost")
        timings["precision+cost"] = round(time.time() - t, 1)
        _show(sections["precision"], timings["precision+cost"])
        _show(sections["cost"])
        sections["body_cost"] = _timed("body_cost", timings, lambda: _body_cost(sections["cost"]))
    if "loaded" in only:
        under_load = loaded.QUICK if quick else replace(loaded.CONFIG, hogs=hogs)
        sections["loaded"] = _timed("loaded", timings, lambda: loaded.run(under_load))
    if "steady" in only:
        sections["steady"] = _timed("steady", timings, lambda: steady.section(quick=quick))
    if "history_cost" in only:
        sections["history_cost"] = _timed("history_cost", timings, history_cost.section)
    if "delivery_limits" in only:
        sections["delivery_limits"] = _timed("delivery_limits", timings, lambda: delivery_limits.section(quick=quick))
    if "pacing_order" in only:
        sections["pacing_order"] = _timed("pacing_order", timings, lambda: pacing_order.run(rounds=1 if quick else 5))
    if "pacing_rate" in only:
        sections["pacing_rate"] = _timed("pacing_rate", timings, lambda: pacing_rate.section(quick=quick))
    if "flow_keys" in only:
        sections["flow_keys"] = _timed("flow_keys", timings, lambda: flow_keys.section(quick=quick))
    if "ordering" in only:
        sections["ordering"] = _timed("ordering", timings, lambda: ordering.section(quick=quick))
    if "windows" in only:
        sections["windows"] = _timed("windows", timings, lambda: windows.section(quick=quick))
    if "circuit_breaker" in only:
        sections["circuit_breaker"] = _timed("circuit_breaker", timings, lambda: circuit_breaker.section(quick=quick))
    if "bulk_operations" in only:
        sections["bulk_operations"] = _timed("bulk_operations", timings, lambda: bulk_operations.section(quick=quick))
    if "throughput" in only:
        sizes = {"ingest_posts": 2, "swept": 40, "delivered": 30} if quick else {}
        sections["throughput"] = _timed("throughput", timings, lambda: throughput.run(**sizes))
    if "schedules" in only:
        config = schedules.QUICK if quick else schedules.SchedulesConfig()
        sections["schedules"] = _timed("schedules", timings, lambda: schedules.run(config))
    if "crash" in only:
        crash_config = crash.QUICK if quick else crash.CrashConfig()
        sections["crash"] = _timed("crash", timings, lambda: crash.run(crash_config))
    t = time.time()
    costs = _measured_costs(sections.get("cost"))
    running = {name: _start_child(name, quick, costs) for name in SIDE_BY_SIDE if name in only}
    if running:
        _starting(f"{', '.join(running)} (side by side, each in a process of its own)")
    for name, child in running.items():
        try:
            sections[name] = _finish_child(name, child)
        except Exception:
            sections[name] = _failed(name)
        _show(sections[name], round(time.time() - t, 1))
    timings["side by side"] = round(time.time() - t, 1)
    meta = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "timings": timings,
        "quick": quick,
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "passed": all(s.passed for s in sections.values()),
    }
    ordered = [sections[k] for k in ORDER if k in sections]
    path = write(ordered, meta, out)
    for section in ordered:
        print(f"bench: {'met   ' if section.passed else 'MISSED'} {section.key}", flush=True)
    print(
        f"bench: {'all budgets met' if meta['passed'] else 'SOME BUDGETS MISSED'} in {meta['seconds']:.0f} s; "
        f"results in {path}",
        flush=True,
    )
    return json.loads(path.read_text())


def _timed(name: str, timings: dict[str, float], target: Callable[[], Section]) -> Section:
    """`target`'s section, its seconds in `timings`, announced as it starts and shown as it ends; a target
    that raises is a failed section."""
    _starting(name)
    started = time.time()
    try:
        section = target()
    except Exception:
        section = _failed(name)
    timings[name] = round(time.time() - started, 1)
    _show(section, timings[name])
    return section


def _starting(what: str) -> None:
    print(f"bench: {time.strftime('%H:%M:%S')} starting {what}...", flush=True)


def _show(section: Section, seconds: float | None = None) -> None:
    """A section's table as soon as it is done (a long run is never silent until its end)."""
    took = "" if seconds is None else f" in {seconds:.0f} s"
    print(f"bench: {section.key} done{took}\n{section.markdown()}", flush=True)


def _body_cost(cost_section: Section) -> Section:
    """The per-size table from the precision run's measured figures and the handlers' log bytes."""
    if "messages" not in cost_section.data:
        raise RuntimeError("the cost target did not run, so there are no measured figures to price")
    measured = body_cost.measured_from(cost_section, log_bytes.measure(1), log_bytes.measure(10))
    source = f"measured in this run ({cost_section.data['messages']['delivered']:,} messages)"
    return body_cost.section(measured, source=source)


def _failed(name: str) -> Section:
    """A target that raised: one failed check, and the traceback's end in the notes."""
    section = Section(name, f"{name}: did not run to the end")
    section.check("target ran", "no", budget="yes", passed=False)
    section.notes.append(traceback.format_exc(limit=4)[-1500:].replace("\n", " | "))
    traceback.print_exc()
    return section


def _measured_costs(section: Section | None) -> capacity_sim.Costs:
    if section is None:
        return capacity_sim.Costs()
    swept = section.data.get("dynamodb", {}).get("swept_per_message") or {}
    total = float(swept.get("write") or 6.0)
    return capacity_sim.Costs(table=total - 2.0, index=2.0)


def _start_child(name: str, quick: bool, costs: capacity_sim.Costs | None = None) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "bench", "--child", name]
    if quick:
        args.append("--quick")
    if costs is not None:
        args += ["--costs", json.dumps(costs.__dict__)]
    env = {**os.environ, "HOURGLASS_LOG_LEVEL": "WARNING"}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish_child(name: str, child: subprocess.Popen[str]) -> Section:
    stdout, stderr = child.communicate(timeout=1800)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        raise RuntimeError(f"bench target {name} failed:\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return Section.from_json(name, json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the bench code, not the budgets")
    parser.add_argument("--only", default=",".join(ORDER), help=f"comma-separated targets of {', '.join(ORDER)}")
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--costs", help=argparse.SUPPRESS)
    parser.add_argument("--hogs", type=int, default=loaded.HOGS, help="busy processes beside the loaded target")
    args = parser.parse_args(argv)
    os.environ.setdefault("HOURGLASS_LOG_LEVEL", "WARNING")
    logs.set_level(os.environ["HOURGLASS_LOG_LEVEL"])
    if args.child:
        use_dummy_credentials("us-east-1")
        costs = capacity_sim.Costs(**json.loads(args.costs)) if args.costs else None
        print(json.dumps(side_section(args.child, args.quick, costs).to_json(), default=str), flush=True)
        return 0
    doc = run_all(quick=args.quick, only=tuple(args.only.split(",")), out=args.out, hogs=args.hogs)
    if not args.quick and args.out == RESULTS / "latest.json" and set(args.only.split(",")) == set(ORDER):
        write_readme_figures(doc)  # only a full run's figures replace the README's
    return 0 if doc["meta"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
