"""Sample input for bulk scheduling: several queues, mixed delays and deliver_at, dedup ids, ~1% bad rows.

python -m pipeline sample --rows 1000000 --out pipeline/out/sample.csv    (or .jsonl)
python -m pipeline sample --create-queues http://127.0.0.1:8080            (the sample's queues, if missing)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from hourglass.core.timestamps import format_rfc3339, parse_rfc3339

from pipeline import cells
from pipeline.deployment import Deployment

# name, weight, settings (the REST body of PUT /v1/queues/{name}); names of their own, so the sample's rows
# never reach the queues (and receivers) of the README's examples.
QUEUES: tuple[tuple[str, int, dict[str, Any]], ...] = (
    ("sample-orders", 40, {}),
    ("sample-emails", 25, {"default_delay": 60}),
    ("sample-reminders", 15, {"max_delay": 30 * 86400, "ttl": 14 * 86400}),
    ("sample-webhooks", 15, {"retry": {"max_attempts": 8, "backoff_base": 2, "backoff_max": 600}}),
    ("sample-reports", 5, {"default_delay": 3600}),
)
# Some deliver_at values carry an offset other than Z, as real exports do.
_PLUS_TWO = timezone(timedelta(hours=2))
# Deliveries of the sample land in these SQS queues of the emulator (created by --create-queues).
TARGET_QUEUE = "hourglass-sample-target"
PRIORITY_QUEUE = "hourglass-sample-priority"
SQS_TARGET = json.dumps(
    {"type": "sqs", "queue_url": f"https://sqs.us-east-1.amazonaws.com/123456789012/{PRIORITY_QUEUE}"},
    separators=(",", ":"),
)
BAD_ROWS: tuple[dict[str, str], ...] = (
    {"queue": "sample-orderz", "body": "{}", "delay": "5"},
    {"queue": "bad queue!", "body": "{}", "delay": "5"},
    {"queue": "sample-orders", "body": "{}", "delay": "-5"},
    {"queue": "sample-orders", "body": "{}", "delay": "soon"},
    {"queue": "sample-orders", "body": "{}", "delay": "5", "deliver_at": "2026-12-24T18:00:00Z"},
    {"queue": "sample-emails", "body": "{}", "deliver_at": "tomorrow"},
    {"queue": "sample-emails", "body": "{}", "ttl": "0"},
    {"queue": "sample-webhooks", "body": "{}", "target": "{not json"},
    {"queue": "sample-webhooks", "body": "{}", "target": '{"type":"ftp"}'},
    {"queue": "sample-orders", "delay": "5"},
    {"queue": "sample-reminders", "body": "{}", "delay": str(40 * 86400)},
)


class Generator:
    """Deterministic for a seed and a start time, so a regenerated file reschedules nothing."""

    def __init__(self, seed: int, start: datetime, bad_fraction: float) -> None:
        self.random = random.Random(seed)
        self.start = start
        self.bad_fraction = bad_fraction
        self.names = [name for name, _, _ in QUEUES]
        self.weights = [weight for _, weight, _ in QUEUES]
        self.bodies: dict[str, Callable[[int], str]] = {
            "sample-orders": lambda i: f'{{"order_id":"o-{i}","amount":{i % 997 + 0.99:.2f},"currency":"EUR"}}',
            "sample-emails": lambda i: f'{{"to":"user{i % 50000}@example.com","template":"welcome"}}',
            "sample-reminders": lambda i: f"Call back customer {i % 20000}",
            "sample-webhooks": lambda i: f'{{"event":"invoice.paid","invoice":"in_{i:08d}"}}',
            "sample-reports": lambda i: f'{{"report":"daily","shard":{i % 16}}}',
        }

    def rows(self, count: int) -> Iterator[dict[str, str]]:
        rnd = self.random
        queues = rnd.choices(self.names, self.weights, k=count)
        for i, queue in enumerate(queues):
            if rnd.random() < self.bad_fraction:
                yield dict(rnd.choice(BAD_ROWS))
                continue
            row = {"queue": queue, "body": self.bodies[queue](i), **self._timing(queue)}
            if rnd.random() < 0.10:
                row["ttl"] = str(rnd.choice((600, 3600, 86400, 7 * 86400)))
            if rnd.random() < 0.20:
                # Drawn from a pool a little smaller than the rows that use it, so some repeat.
                row["dedup_id"] = f"{queue}-{rnd.randrange(max(1, count // 6))}"
            if rnd.random() < 0.03:
                row["target"] = SQS_TARGET
            yield row

    def _timing(self, queue: str) -> dict[str, str]:
        rnd = self.random
        kind = rnd.random()
        if kind < 0.15:
            return {}  # the queue's default_delay
        seconds = self._delay_seconds(30 * 86400 if queue == "sample-reminders" else 7 * 86400)
        if kind < 0.70:
            return {"delay": str(seconds) if rnd.random() < 0.7 else f"{seconds + rnd.random():.3f}"}
        if rnd.random() < 0.05:
            seconds = -rnd.randrange(1, 3600)  # deliver_at in the past: due at once
        due = self.start + timedelta(seconds=seconds)
        if rnd.random() < 0.8:
            return {"deliver_at": format_rfc3339(due)}
        return {"deliver_at": due.astimezone(_PLUS_TWO).isoformat(timespec="seconds")}

    def _delay_seconds(self, ceiling: int) -> int:
        band = self.random.random()
        if band < 0.10:
            return self.random.randrange(0, 10)
        if band < 0.40:
            return self.random.randrange(10, 600)
        if band < 0.80:
            return self.random.randrange(600, 86400)
        return self.random.randrange(86400, ceiling)


def write(path: Path, rows: Iterator[dict[str, str]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", newline="", encoding="utf-8") as out:
        if path.suffix == ".jsonl":
            for row in rows:
                out.write(json.dumps(_json_row(row), separators=(",", ":")) + "\n")
                count += 1
        else:
            writer = csv.DictWriter(out, fieldnames=cells.COLUMNS, lineterminator="\n")
            writer.writeheader()
            for row in rows:
                writer.writerow(row)
                count += 1
    return count


def _json_row(row: dict[str, str]) -> dict[str, Any]:
    """The same row as a JSON document: the CSV cell conventions applied (see pipeline/cells.py)."""
    return json.loads(cells.document(row))


def create_queues(api_url: str, api_key: str | None, endpoint_url: str | None) -> list[str]:
    """PUTs each sample queue that does not exist yet (existing settings are left alone).

    With the emulator's endpoint, the SQS queues the sample delivers to are created too and become
    the queues' target, so a `make dev` run delivers instead of failing for want of a target.
    """
    target = _target_queues(endpoint_url) if endpoint_url else None
    created = []
    for name, _, settings in QUEUES:
        url = f"{api_url.rstrip('/')}/v1/queues/{name}"
        if _call("GET", url, None, api_key) == 200:
            continue
        status = _call("PUT", url, {**settings, **({"target": target} if target else {})}, api_key)
        if status not in (200, 201):
            raise RuntimeError(f"PUT {url} answered {status}")
        created.append(name)
    return created


def _target_queues(endpoint_url: str) -> dict[str, str]:
    sqs = Deployment(table="", endpoint_url=endpoint_url).client("sqs")
    sqs.create_queue(QueueName=PRIORITY_QUEUE)
    return {"type": "sqs", "queue_url": sqs.create_queue(QueueName=TARGET_QUEUE)["QueueUrl"]}


def _call(method: str, url: str, body: Any, api_key: str | None) -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if api_key:
        request.add_header("x-api-key", api_key)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline sample", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("pipeline/out/sample.csv"), help=".csv or .jsonl")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--start", help="RFC 3339 time deliver_at values are relative to (default: now)")
    p.add_argument("--bad-fraction", type=float, default=0.01)
    p.add_argument("--create-queues", metavar="API_URL", help="create the sample's queues through this REST API")
    p.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="with --create-queues: the emulator where the sample's SQS target queues are created",
    )
    args = p.parse_args(argv)
    if args.create_queues:
        try:
            created = create_queues(args.create_queues, os.environ.get("HOURGLASS_API_KEY"), args.endpoint_url)
        except (OSError, RuntimeError, BotoCoreError, ClientError) as exc:
            print(
                f"error: cannot create the sample queues at {args.create_queues} (is `make dev` running?): {exc}",
                file=sys.stderr,
            )
            return 1
        print(f"queues created: {', '.join(created) or 'none (all exist)'}")
    if args.rows > 0:
        start = parse_rfc3339(args.start) if args.start else datetime.now(UTC).replace(microsecond=0)
        started = time.monotonic()
        count = write(args.out, Generator(args.seed, start, args.bad_fraction).rows(args.rows))
        print(f"wrote {count} rows to {args.out} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
