"""Benchmark results: checks against budgets, Markdown tables for the terminal, JSON for bench/results."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent / "README.md"
# bench/README.md's "Latest figures" lie between these two lines; a full `make bench` rewrites them.
FIGURES_START = "<!-- latest figures: written by `make bench` from bench/results/latest.json -->"
FIGURES_END = "<!-- end of latest figures -->"


@dataclass(frozen=True)
class Check:
    """One measured figure, with its budget when it has one (`passed` is None for figures that are only shown)."""

    name: str
    measured: float | str
    unit: str = ""
    budget: str = ""
    passed: bool | None = None

    def row(self) -> list[str]:
        verdict = {True: "pass", False: "FAIL", None: ""}[self.passed]
        return [self.name, self.budget or "-", f"{_fmt(self.measured)} {self.unit}".strip(), verdict]


@dataclass
class Section:
    """A target's table, its notes, and the raw figures kept in the JSON."""

    key: str
    title: str
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def check(
        self, name: str, measured: float | str, unit: str = "", *, budget: str = "", passed: bool | None = None
    ) -> None:
        self.checks.append(Check(name, measured, unit, budget, passed))

    def at_most(
        self, name: str, measured: float, unit: str, limit: float, *, shown: str = "", required: bool = True
    ) -> None:
        """A figure whose budget is `≤ limit` (written `≤ shown` when given); fails when not `required`."""
        self.check(name, measured, unit, budget=f"≤ {shown or f'{limit:g}'}", passed=required and measured <= limit)

    @property
    def passed(self) -> bool:
        return all(c.passed is not False for c in self.checks)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| figure | budget | measured | result |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(c.row()) + " |" for c in self.checks]
        table = self.data.get("table")
        if table:
            lines += ["", "| " + " | ".join(table["header"]) + " |", "|" + "---|" * len(table["header"])]
            lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
        lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"

    @classmethod
    def from_json(cls, key: str, doc: dict[str, Any]) -> Section:
        data = {k: v for k, v in doc.items() if k not in ("title", "passed", "checks", "notes")}
        checks = [Check(**c) for c in doc["checks"]]
        return cls(key, doc["title"], checks, list(doc["notes"]), data)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "passed": self.passed,
            "checks": [c.__dict__ for c in self.checks],
            "notes": self.notes,
            **self.data,
        }


def write(sections: list[Section], meta: dict[str, Any], path: Path | None = None) -> Path:
    path = path or RESULTS / "latest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, **{s.key: s.to_json() for s in sections}}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=_plain) + "\n")
    tmp.replace(path)
    return path


def figures_markdown(doc: dict[str, Any]) -> str:
    """One line per target of a results document: its budgets met, and when and where it ran."""
    meta = doc["meta"]
    load = ", ".join(f"{v:g}" for v in meta.get("load_average", []))
    lines = [
        f"From `bench/results/latest.json`: started {meta['started']}, {meta['seconds']:.0f} s on "
        f"{meta.get('cpus', '?')} CPUs (load average {load or '?'}), "
        f"{'every budget met' if meta.get('passed') else 'SOME BUDGETS MISSED'}.",
        "",
        "| target | budgets met | result |",
        "|---|---|---|",
    ]
    for key, section in doc.items():
        if key == "meta":
            continue
        budgeted = [c for c in section["checks"] if c["passed"] is not None]
        met = sum(1 for c in budgeted if c["passed"])
        lines.append(f"| {section['title']} | {met} of {len(budgeted)} | {'pass' if section['passed'] else 'FAIL'} |")
    if meta.get("note"):
        lines += ["", meta["note"]]
    return "\n".join(lines)


def write_readme_figures(doc: dict[str, Any], readme: Path = README) -> None:
    """Replaces the figures between FIGURES_START and FIGURES_END of `readme` with those of `doc`."""
    text = readme.read_text(encoding="utf-8")
    head, found, rest = text.partition(FIGURES_START)
    _, ended, tail = rest.partition(FIGURES_END)
    if not (found and ended):
        raise ValueError(f"{readme} has no {FIGURES_START!r} ... {FIGURES_END!r} block")
    readme.write_text(f"{head}{FIGURES_START}\n{figures_markdown(doc)}\n{FIGURES_END}{tail}", encoding="utf-8")


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of `values`; NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _fmt(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "n/a"
    if value == int(value) and abs(value) >= 10:
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)
