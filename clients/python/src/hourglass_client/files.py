"""Message files for `hourglass send --file`: every row read and checked before anything is sent, each
with its file line and a dedup id derived from the file, so that a re-run stores no row twice."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from hourglass_client.errors import HourglassError

CSV_TEXT = ("deliver_at", "timezone", "dedup_id", "flow_key")
CSV_NUMBERS = ("delay", "ttl")
# How the API names one message of a create request in an error (`messages[39].delay: ...`).
_ENTRY = re.compile(r"^messages\[(\d+)\]\.?")


@dataclass(frozen=True)
class Row:
    line: int
    entry: dict[str, Any]


def read(path: Path, fmt: str | None) -> list[Row]:
    """Every row of a JSON-Lines file (a message object with `body` per line) or a CSV file (columns body,
    delay, deliver_at, timezone, ttl, dedup_id, flow_key, priority; `body` is JSON or text). A bad row stops
    it all with a UsageError naming `<file>:<line>`, before anything is sent."""
    text = _text(path)
    kind = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    rows = _csv_rows(path, text) if kind == "csv" else _jsonl_rows(path, text)
    return _with_file_dedup(path, rows)


def _text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise click.UsageError(f"{path}:{line}: not UTF-8") from exc


def _jsonl_rows(path: Path, text: str) -> list[Row]:
    rows = []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise click.UsageError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(entry, dict) or "body" not in entry:
            raise click.UsageError(f"{path}:{n}: each line must be an object with a `body`")
        rows.append(Row(n, entry))
    return rows


def _csv_rows(path: Path, text: str) -> list[Row]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None) or []
    if "body" not in header:
        raise click.UsageError(f"{path}: the CSV needs a `body` column")
    rows = []
    start = reader.line_num + 1  # a quoted field may span lines: a row starts after the one before
    for record in reader:
        if record:
            rows.append(Row(start, _csv_entry(path, start, dict(zip(header, record, strict=False)))))
        start = reader.line_num + 1
    return rows


def parse_value(text: str) -> Any:
    """JSON when the text is JSON, else the text itself (so `send q hello` sends "hello")."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _csv_entry(path: Path, line: int, row: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"body": parse_value(row.get("body") or "")}
    for column in CSV_NUMBERS:
        if row.get(column):
            try:
                entry[column] = float(row[column])
            except ValueError as exc:
                raise click.UsageError(f"{path}:{line}: {column} must be a number") from exc
    entry.update({column: row[column] for column in CSV_TEXT if row.get(column)})
    if row.get("priority"):
        try:
            entry["priority"] = int(row["priority"])
        except ValueError as exc:
            raise click.UsageError(f"{path}:{line}: priority must be an integer") from exc
    return entry


def _with_file_dedup(path: Path, rows: list[Row]) -> list[Row]:
    """Rows without a `dedup_id` get one from the file's name, the row's content and how many equal
    rows came before it: running the file again, or after fixing a row, stores only the rows not yet
    stored (a changed row is a new message), while equal rows of one file stay separate messages."""
    seen: Counter[str] = Counter()
    derived = []
    for row in rows:
        if row.entry.get("dedup_id") is not None:
            derived.append(row)
            continue
        content = json.dumps(row.entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        seen[content] += 1
        digest = hashlib.sha256(f"{path.name}\0{content}\0{seen[content]}".encode("utf-8", "surrogatepass"))
        derived.append(Row(row.line, {**row.entry, "dedup_id": f"file-{digest.hexdigest()}"}))
    return derived


def refusal(path: Path, rows: list[Row], stored: int, exc: HourglassError) -> str:
    """The error of a request that started at row `stored`, naming `<file>:<line>` for the row it is about."""
    found = _ENTRY.match(exc.message)
    if found is None or stored + int(found.group(1)) >= len(rows):
        return f"{exc.label}: {exc.message}"
    row = rows[stored + int(found.group(1))]
    return f"{path}:{row.line}: {exc.label}: {exc.message[found.end() :].lstrip(': ')}"


def progress_note(rows: list[Row], stored: int, exc: HourglassError) -> str:
    """What a run stopped by `exc` stored: the first `stored` rows, and what became of the rest."""
    done = f"stored {stored} of {len(rows)} messages"
    if stored:
        done += f" (lines {rows[0].line}-{rows[stored - 1].line})"
    rest = f"lines {rows[stored].line}-{rows[-1].line}"
    if 400 <= exc.status < 500:
        return f"{done}; {rest} were not stored. Run the file again once fixed: no row is stored twice."
    # A request whose answer was lost may have been stored: only a re-run can tell.
    return f"{done}; {rest} may not have been. Run the file again: no row is stored twice."
