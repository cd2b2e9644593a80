"""`python -m devstack.rollback --to v1.2.0`: whether a deployed stack may be rolled back to an older release.

Run with the release deployed now, which knows what an older one cannot read: it refuses (exit 3), naming each
thing in the table that the target would handle wrongly, until none is left (docs/upgrades.md, rule 8).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from hourglass import contract
from hourglass.adapters.store import Store
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


def version(text: str) -> Version:
    """`v1.2.0` or `1.2.0`."""
    major, minor, patch = (int(part) for part in text.removeprefix("v").split("."))
    return major, minor, patch


def _ordered_queues(store: Store, now: datetime) -> Iterator[Blocker]:
    cursor: str | None = None
    while True:
        queues, cursor = store.list_queues(limit=100, cursor=cursor)
        for queue in queues:
            if queue.control is not None and queue.control.ordering is not None:
                yield Blocker(
                    "1.3.0",
                    f"queue {queue.name!r} has `ordering`: an older dispatcher would start its keys' messages "
                    "side by side, and a held key would go on",
                    "release its held keys and PUT the queue without `ordering` (nothing is lost)",
                )
        if cursor is None:
            return


def _wide_buckets(store: Store, now: datetime) -> Iterator[Blocker]:
    for bucket, width in sorted(store.wide_buckets(int(now.timestamp())).items()):
        yield Blocker(
            "1.3.0",
            f"due bucket {bucket} is spread over {width} shards: an older sweeper reads only the stack's "
            "fixed shards, so messages in the others would wait until a newer release sweeps them",
            "wait until the bucket's record expires (its messages are then handed off), or roll forward",
        )


# Each check finds the state of a feature that its first release (`Blocker.since`) brought in.
CHECKS: tuple[Callable[[Store, datetime], Iterator[Blocker]], ...] = (_ordered_queues, _wide_buckets)


def blockers(store: Store, target: str, now: datetime) -> list[Blocker]:
    """What in the table a rollback to `target` would handle wrongly (empty: the rollback loses nothing)."""
    to = version(target)
    return [b for check in CHECKS for b in check(store, now) if version(b.since) > to]


def deployed_outputs(stack: str, cloudformation: Any = None) -> dict[str, str]:
    client = cloudformation or boto3.client("cloudformation")
    described = client.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--to", required=True, help="the release to roll back to, e.g. v1.2.0")
    parser.add_argument("--stack", default=STACK_NAME)
    args = parser.parse_args(argv)
    outputs = deployed_outputs(args.stack)
    deployed = outputs.get(contract.OUTPUT_VERSION, __version__)
    if version(args.to) >= version(deployed):
        print(f"{args.to} is not older than the deployed {deployed}: deploy it as an upgrade")
        return 0
    found = blockers(Store(outputs[contract.OUTPUT_TABLE]), args.to, datetime.now(UTC))
    if found:
        print(f"rollback of {args.stack} from {deployed} to {args.to} refused: the table holds")
        print("\n".join(b.line() for b in found))
        return REFUSED
    print(f"rollback of {args.stack} from {deployed} to {args.to}: nothing stored needs {deployed}; deploy {args.to}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
