"""`python -m pipeline {schedule,report,sample} ...`: the data pipeline's command line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = "usage: python -m pipeline {schedule,report,sample} [--help] ..."


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands: dict[str, Callable[[Sequence[str]], int]] = {
        "schedule": _schedule,
        "report": _report,
        "sample": _sample,
    }
    if not args or args[0] not in commands:
        print(USAGE, file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


# Imported on use: `sample` needs no Spark, and each job pulls in only what it runs.
def _schedule(argv: Sequence[str]) -> int:
    from pipeline import schedule_job

    return schedule_job.main(argv)


def _report(argv: Sequence[str]) -> int:
    from pipeline import report_job

    return report_job.main(argv)


def _sample(argv: Sequence[str]) -> int:
    from pipeline import sample

    return sample.main(argv)


if __name__ == "__main__":
    sys.exit(main())
