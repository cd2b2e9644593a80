"""DynamoDB exports to S3 read by their manifests: one finished full export, and incremental ones over it.

Incremental exports apply in time order: per item key the latest write wins, a delete drops the item.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from hourglass.adapters.items import Item

from pipeline.deployment import Deployment

SUMMARY = "manifest-summary.json"
FILES = "manifest-files.json"
STARTED = "_started"
FULL = "FULL_EXPORT"
INCREMENTAL = "INCREMENTAL_EXPORT"
# (pk, sk) -> (write time in microseconds, the item or None for a delete)
Change = tuple[tuple[str, str], tuple[int, Item | None]]


class ExportError(ValueError):
    """The export cannot be read as asked (unfinished, ambiguous, an unsupported format)."""


@dataclass(frozen=True)
class Export:
    root: str
    kind: str
    # When its data is from: exportTime of a full export, exportToTime of an incremental one (microseconds).
    as_of_us: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """What to read: exports in the order to apply them, or bare data files (no manifests)."""

    exports: tuple[Export, ...]
    bare_files: tuple[str, ...] = ()

    def describe(self) -> str:
        if not self.exports:
            return f"{len(self.bare_files)} export data files"
        full = self.exports[0]
        more = f" + {len(self.exports) - 1} incremental" if len(self.exports) > 1 else ""
        return f"export {full.root}{more}"


def plan(path: str, deployment: Deployment | None = None) -> Plan:
    """The exports under `path` (an export directory or a prefix), checked: one full export, finished,
    with any incremental exports after it; or, without any manifest, the data files found there."""
    files = _list(path, deployment)
    summaries = sorted(f for f in files if f.endswith("/" + SUMMARY) or f == SUMMARY)
    roots = {f.rsplit("/", 1)[0] for f in summaries}
    unfinished = sorted(
        f.rsplit("/", 1)[0] for f in files if f.rsplit("/", 1)[-1] == STARTED and f.rsplit("/", 1)[0] not in roots
    )
    if unfinished:
        raise ExportError(
            f"export {unfinished[0]} has not finished (it has {STARTED} but no {SUMMARY}); "
            "wait for it (aws dynamodb describe-export) or point --export at a finished one"
        )
    if not summaries:
        data = sorted(f for f in files if _data_file(f))
        if not data:
            raise ExportError(f"no export data files (*.json, *.json.gz) under {path}")
        return Plan((), tuple(data))
    exports = sorted((_export(s, deployment) for s in summaries), key=lambda e: (e.kind != FULL, e.as_of_us))
    fulls = [e.root for e in exports if e.kind == FULL]
    if len(fulls) != 1:
        found = ", ".join(fulls) if fulls else "none"
        raise ExportError(
            f"{path} holds {len(fulls)} full exports ({found}); point --export at one export directory, "
            "or at a prefix holding one full export and the incremental exports taken after it"
        )
    full = exports[0]
    early = [e.root for e in exports[1:] if e.as_of_us <= full.as_of_us]
    if early:
        raise ExportError(f"incremental export {early[0]} ends before the full export {full.root} was taken")
    return Plan(tuple(exports))


def changes(lines: Iterable[bytes | str], default_us: int, where: str = "") -> Iterator[Change]:
    """Full-export lines (`{"Item": ...}`, written at `default_us`) and incremental lines
    (`{"Metadata": {"WriteTimestampMicros": ...}, "Keys": ..., "NewImage"?: ...}`) as changes per key."""
    for number, line in enumerate(lines, start=1):
        text = line.strip() if isinstance(line, str) else line.decode().strip()
        if not text:
            continue
        doc = json.loads(text)
        if "Item" in doc:
            item = doc["Item"]
            yield _key(item), (default_us, item)
        elif "Keys" in doc:
            written = int(doc.get("Metadata", {}).get("WriteTimestampMicros", {}).get("N", default_us))
            yield _key(doc["Keys"]), (written, doc.get("NewImage"))
        else:
            raise ExportError(f"{where} line {number}: neither an Item nor Keys (not DynamoDB JSON export data)")


def latest(a: tuple[int, Item | None], b: tuple[int, Item | None]) -> tuple[int, Item | None]:
    """The later of two writes of one key; at equal times a delete wins (it can only follow a write)."""
    if a[0] != b[0]:
        return a if a[0] > b[0] else b
    return a if a[1] is None else b


def lines(url: str, deployment: Deployment | None = None) -> Iterator[bytes]:
    """The lines of one local file or S3 object, gunzipped when its name ends in .gz, streamed."""
    if url.startswith("s3://"):
        bucket, key = _split(url)
        body = _s3(deployment).get_object(Bucket=bucket, Key=key)["Body"]
        if key.endswith(".gz"):
            yield from gzip.GzipFile(fileobj=body)
        else:
            yield from body.iter_lines()
        return
    opener: Any = gzip.open if url.endswith(".gz") else open
    with opener(url, "rb") as data:
        yield from data


def _export(summary_url: str, deployment: Deployment | None) -> Export:
    root = summary_url.rsplit("/", 1)[0]
    summary = json.loads(b"".join(lines(summary_url, deployment)))
    fmt = summary.get("outputFormat", "DYNAMODB_JSON")
    if fmt != "DYNAMODB_JSON":
        raise ExportError(f"export {root} is {fmt}; export with --export-format DYNAMODB_JSON")
    kind = summary.get("exportType", FULL)
    as_of = summary.get("exportToTime") if kind == INCREMENTAL else summary.get("exportTime")
    listed = _manifest_files(root, summary, deployment)
    return Export(root, kind, _micros(as_of), tuple(listed))


def _manifest_files(root: str, summary: dict[str, Any], deployment: Deployment | None) -> list[str]:
    """The data files manifest-files.json lists, located under `root` (local copy or S3)."""
    name = str(summary.get("manifestFilesS3Key") or FILES).rsplit("/", 1)[-1]
    found = []
    try:
        listed = list(lines(f"{root}/{name}", deployment))
    except (OSError, ClientError) as exc:
        raise ExportError(f"export {root} has {SUMMARY} but its {name} cannot be read: {exc}") from exc
    for line in listed:
        if not line.strip():
            continue
        key = json.loads(line).get("dataFileS3Key")
        if not key:
            raise ExportError(f"{root}/{name}: a line without dataFileS3Key")
        # The key is bucket-relative: .../AWSDynamoDB/<id>/data/<file>; data/<file> is below root.
        found.append(f"{root}/data/{key.rsplit('/data/', 1)[-1]}")
    return found


def _micros(stamp: Any) -> int:
    if stamp is None:
        return 0
    if isinstance(stamp, (int, float)):
        return int(stamp * 1_000_000)
    return int(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() * 1_000_000)


def _key(item: Item) -> tuple[str, str]:
    return item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")


def _data_file(url: str) -> bool:
    name = url.rsplit("/", 1)[-1]
    return name.endswith((".json", ".json.gz")) and not name.startswith(("manifest", "_"))


def _list(path: str, deployment: Deployment | None) -> list[str]:
    if path.startswith("s3://"):
        bucket, prefix = _split(path)
        pages = _s3(deployment).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(f"s3://{bucket}/{o['Key']}" for page in pages for o in page.get("Contents", []))
    local = Path(path)
    if local.is_file():
        return [str(local)]
    return sorted(str(p) for p in local.rglob("*") if p.is_file())


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def _s3(deployment: Deployment | None) -> Any:
    return (deployment or Deployment(table="")).client("s3")
