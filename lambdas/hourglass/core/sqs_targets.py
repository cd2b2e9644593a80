"""Which SQS queues may be message targets: a stack setting of queue ARNs, queue names and name prefixes.

`HOURGLASS_SQS_TARGETS` is a comma-separated list of `arn:aws:sqs:<region>:<account>:<name>`,
`<name>` (a queue of the stack's own account) or `<prefix>*`. Empty: no SQS target is allowed.
The timer queue and its DLQ are never allowed, whatever the list says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

NAME = re.compile(r"[A-Za-z0-9_-]{1,80}(\.fifo)?")
PREFIX = re.compile(r"[A-Za-z0-9_-]{1,79}")
ARN = re.compile(r"arn:aws[a-z-]*:sqs:[a-z0-9-]+:(\d{12}):([A-Za-z0-9_-]{1,80}(?:\.fifo)?)")


@dataclass(frozen=True)
class QueueRef:
    account: str
    name: str


@dataclass(frozen=True)
class SqsTargetRule:
    arns: tuple[QueueRef, ...] = ()
    names: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> SqsTargetRule:
        """The rule a setting describes; ValueError naming the entry that is not an ARN, name or prefix."""
        arns: list[QueueRef] = []
        names: list[str] = []
        prefixes: list[str] = []
        for entry in (e.strip() for e in spec.split(",")):
            if not entry:
                continue
            arn = ARN.fullmatch(entry)
            if arn:
                arns.append(QueueRef(arn.group(1), arn.group(2)))
            elif entry.endswith("*") and PREFIX.fullmatch(entry[:-1]):
                prefixes.append(entry[:-1])
            elif NAME.fullmatch(entry):
                names.append(entry)
            else:
                raise ValueError(f"{entry!r} is not an SQS queue ARN, a queue name or a name prefix ending in *")
        return cls(tuple(arns), tuple(names), tuple(prefixes))

    def allows(self, queue: QueueRef, own_account: str | None) -> bool:
        if queue in self.arns:
            return True
        if own_account is not None and queue.account != own_account:
            return False
        return queue.name in self.names or any(queue.name.startswith(p) for p in self.prefixes)


def queue_ref(url: str) -> QueueRef | None:
    """Account and name of an SQS queue URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if len(parts) != 2 or not re.fullmatch(r"\d{12}", parts[0]) or not NAME.fullmatch(parts[1]):
        return None
    return QueueRef(parts[0], parts[1])


def refusal(url: str, rule: SqsTargetRule, *, reserved: tuple[str, ...]) -> str | None:
    """Why `url` may not be a target (None when it may); `reserved` are the timer queue and its DLQ."""
    queue = queue_ref(url)
    if queue is None:
        return "is not an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)"
    own = [r for r in (queue_ref(u) for u in reserved if u) if r is not None]
    if queue in own:
        return "is one of Hourglass's own queues"
    if not rule.allows(queue, own[0].account if own else None):
        return "is not an allowed SQS target (the stack setting hourglass:sqs_targets lists them)"
    return None
