"""`python -m devstack.rollback --to v1.2.0`: whether a deployed stack may be rolled back to an older release.

Run with the release deployed now, which knows what an older one cannot read: it refuses (exit 3), naming each
thing in the table that the target would handle wrongly, until none is left (docs/upgrades.md, rule 8).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.store import Store
from hourglass.core.keys import OUTBOX_PK, bucket_of_pk, bucket_pk, outbox_shards
from hourglass.core.model import Queue
from hourglass.version import __version__

from devstack.deployed import STACK_NAME

REFUSED = 3
Version = tuple[int, int, int]


@dataclass(frozen=True)
class Blocker:
    """Stored state that a release older than `since` would handle wrongly, and how to clear it."""

    since: str
    what: str
    clear: str

    def line(self) -> str:
        return f"- {self.what} (needs {self.since}): {self.clear}"


@dataclass(frozen=True)
class Deployed:
    """The deployed stack as the checks see it: its table, the due-index shards its settings name (what a
    sweeper without widths reads), and now."""

    store: Store
    shards: int
    now: datetime


def version(text: str) -> Version:
    """`v1.2.0` or `1.2.0`."""
    major, minor, patch = (int(part) for part in text.removeprefix("v").split("."))
    return major, minor, patch


def _queues(deployed: Deployed) -> Iterator[Queue]:
    cursor: str | None = None
    while True:
        queues, cursor = deployed.store.list_queues(limit=100, cursor=cursor)
        yield from queues
        if cursor is None:
            return


def _ordered_queues(deployed: Deployed) -> Iterator[tuple[str, str]]:
    for queue in _queues(deployed):
        if queue.control is not None and queue.control.ordering is not None:
            yield (
                f"queue {queue.name!r} has `ordering`: an older dispatcher would start its keys' messages "
                "side by side, and a held key would go on",
                "release its held keys and PUT the queue without `ordering` (nothing is lost)",
            )


def _spread_queues(deployed: Deployed) -> Iterator[tuple[str, str]]:
    for queue in _queues(deployed):
        if queue.partitions > 1:
            yield (
                f"queue {queue.name!r} spreads its messages over {queue.partitions} partitions (it took more than "
                "a partition's share): an older release would look for them only in the queue's own",
                "let its messages end (delivered, cancelled or expired), then DELETE and PUT the queue again; "
                "or roll forward",
            )


def _beyond_base(deployed: Deployed) -> Iterator[tuple[str, str]]:
    """(partition, base partition) of every shard an older sweeper would not read: those of a bucket recorded
    wider than the stack's shards (its record not expired), beyond them. A wider shard falls under the base
    shard `shard % shards` (core.due_width)."""
    for bucket, width in sorted(deployed.store.wide_buckets(int(deployed.now.timestamp())).items()):
        for shard in range(deployed.shards, width):
            yield bucket_pk(bucket, shard), bucket_pk(bucket, shard % deployed.shards)


def _wide_buckets(deployed: Deployed) -> Iterator[tuple[str, str]]:
    waiting = Counter(bucket_of_pk(pk) for pk, _ in _beyond_base(deployed) for _ in deployed.store.due_entries(pk))
    for bucket, entries in sorted((b, n) for b, n in waiting.items() if b is not None):
        yield (
            f"due bucket {bucket} holds {entries} message(s) in shards beyond the stack's {deployed.shards}: "
            "an older sweeper would never read them",
            "`--rehome` moves them to the shards it reads (run it again once the older release is deployed)",
        )


def _sharded_notices(deployed: Deployed) -> Iterator[tuple[str, str]]:
    owed = sum(1 for pk in outbox_shards() for _ in deployed.store.due_entries(pk))
    if owed:
        yield (
            f"the failure-notice outbox holds {owed} notice(s) still owed in its shards: an older release reads "
            "only `notice#` and would never send them",
            "`--rehome` moves them to `notice#` (run it again once the older release is deployed)",
        )


# The release that brought each feature in, and the check of whether the table holds its state.
CHECKS: tuple[tuple[str, Callable[[Deployed], Iterator[tuple[str, str]]]], ...] = (
    ("1.3.0", _ordered_queues),
    ("1.3.0", _wide_buckets),
    ("1.3.0", _sharded_notices),
    ("1.3.0", _spread_queues),
)


def blockers(deployed: Deployed, target: str) -> list[Blocker]:
    """What in the table a rollback to `target` would handle wrongly (empty: the rollback loses nothing)."""
    to = version(target)
    return [Blocker(since, *found) for since, check in CHECKS if version(since) > to for found in check(deployed)]


def rehome(deployed: Deployed) -> int:
    """Moves every due-index entry an older release would not read into the partition it reads (a bucket's base
    shard, the unsharded outbox); how many moved. Safe beside the newer release, which reads those too."""
    # A release before the outbox's shards reads only its one partition.
    moves = (*_beyond_base(deployed), *((pk, OUTBOX_PK) for pk in outbox_shards()))
    store = deployed.store
    return sum(store.move_due_entry(entry, pk, to) for pk, to in moves for entry in list(store.due_entries(pk)))


def deployed_outputs(stack: str, cloudformation: Any = None) -> dict[str, str]:
    client = cloudformation or boto3.client("cloudformation")
    described = client.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--to", required=True, help="the release to roll back to, e.g. v1.2.0")
    parser.add_argument("--stack", default=STACK_NAME)
    parser.add_argument("--rehome", action="store_true", help="first move due entries an older sweeper cannot read")
    args = parser.parse_args(argv)
    outputs = deployed_outputs(args.stack)
    running = outputs.get(contract.OUTPUT_VERSION, __version__)
    deployed = Deployed(Store(outputs[contract.OUTPUT_TABLE]), int(outputs[contract.OUTPUT_SHARDS]), datetime.now(UTC))
    if args.rehome:  # also after the older release is deployed: what the newer one wrote until then
        print(f"moved {rehome(deployed)} due-index entries into the partitions {args.to} reads")
    if version(args.to) >= version(running):
        print(f"{args.to} is not older than the deployed {running}: nothing to check")
        return 0
    found = blockers(deployed, args.to)
    if found:
        print(f"rollback of {args.stack} from {running} to {args.to} refused: the table holds")
        print("\n".join(b.line() for b in found))
        return REFUSED
    print(f"rollback of {args.stack} from {running} to {args.to}: nothing stored needs {running}; deploy {args.to}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
