"""The report.md document: what was read, the charts, and the report tables as Markdown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hourglass.core.timestamps import format_rfc3339

MAX_ROWS = 50


@dataclass(frozen=True)
class Section:
    title: str
    rows: Sequence[Any]
    columns: Sequence[str]
    note: str = ""
    total_rows: int | None = None


@dataclass(frozen=True)
class Report:
    source: str
    now: datetime
    messages: int
    charts: Sequence[tuple[str, str]]
    sections: Sequence[Section] = field(default_factory=list)


def render(report: Report) -> str:
    lines = [
        "# Hourglass delivery report",
        "",
        f"- source: {report.source}",
        f"- as of: {format_rfc3339(report.now)}",
        f"- messages read: {report.messages}",
        "- every table is also under `csv/` and `parquet/` next to this file",
        "",
    ]
    for title, path in report.charts:
        lines += [f"![{title}]({path})", ""]
    for section in report.sections:
        lines += _section(section)
    return "\n".join(lines)


def _section(section: Section) -> list[str]:
    lines = [f"## {section.title}", ""]
    if section.note:
        lines += [section.note, ""]
    if not section.rows:
        return [*lines, "(none)", ""]
    lines.append("| " + " | ".join(section.columns) + " |")
    lines.append("|" + "|".join("---" for _ in section.columns) + "|")
    for row in section.rows[:MAX_ROWS]:
        lines.append("| " + " | ".join(_cell(row[c]) for c in section.columns) + " |")
    shown = min(len(section.rows), MAX_ROWS)
    total = section.total_rows if section.total_rows is not None else len(section.rows)
    if total > shown:
        lines.append(f"\n{shown} of {total} rows shown.")
    return [*lines, ""]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return format_rfc3339(value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")
