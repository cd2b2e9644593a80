"""AWS service targets (Lambda, SNS, EventBridge, Step Functions): their ARNs, the stack's allow-list of each
kind (ARNs or names, `*` wildcards as IAM reads them) and the one matcher that both the check at create and the
stack's IAM grants use. Nothing whose name starts with the stack's own name (every resource it made) may be one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from hourglass.core.model import AwsTarget, EventBridgeTarget, LambdaTarget, SnsTarget, StepFunctionsTarget

_ARN_HEAD = r"arn:aws[a-z-]*:{service}:[a-z0-9-]+:\d{{12}}:"
# What an allow-list entry may hold besides its literal parts: IAM's `*` (any characters, `:` and `/` too).
_PATTERN_CHARS = r"[A-Za-z0-9_.:/$*-]"
MAX_EXECUTION_NAME = 80


@dataclass(frozen=True)
class Kind:
    """One target type: its ARN's service and resource prefix, the target field holding the ARN, and the
    stack setting (`hourglass:<type>_targets`) that lists those allowed."""

    type: str
    service: str
    resource: str
    name: str
    field: str
    action: str
    label: str

    @property
    def setting(self) -> str:
        return f"hourglass:{self.type}_targets"

    @property
    def arn(self) -> re.Pattern[str]:
        """A target's ARN; group 1 is the resource name (with a Lambda qualifier, if any)."""
        return re.compile(_ARN_HEAD.format(service=self.service) + re.escape(self.resource) + f"({self.name})")

    @property
    def entry(self) -> re.Pattern[str]:
        """An allow-list ARN entry: any part but the service and resource prefix may be a wildcard."""
        head = rf"arn:aws[a-z*-]*:{self.service}:[a-z0-9*-]+:(?:\d{{12}}|\*):"
        return re.compile(head + re.escape(self.resource) + f"({_PATTERN_CHARS}+)")


KINDS: dict[str, Kind] = {
    kind.type: kind
    for kind in (
        Kind(
            "lambda",
            "lambda",
            "function:",
            r"[A-Za-z0-9_-]{1,64}(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?",
            "function_arn",
            "lambda:InvokeFunction",
            "a Lambda function",
        ),
        Kind("sns", "sns", "", r"[A-Za-z0-9_-]{1,256}(?:\.fifo)?", "topic_arn", "sns:Publish", "an SNS topic"),
        Kind(
            "eventbridge",
            "events",
            "event-bus/",
            r"[A-Za-z0-9/._-]{1,256}",
            "event_bus_arn",
            "events:PutEvents",
            "an EventBridge event bus",
        ),
        Kind(
            "stepfunctions",
            "states",
            "stateMachine:",
            r"[A-Za-z0-9_-]{1,80}",
            "state_machine_arn",
            "states:StartExecution",
            "a Step Functions state machine",
        ),
    )
}
TYPES: dict[type, str] = {
    LambdaTarget: "lambda",
    SnsTarget: "sns",
    EventBridgeTarget: "eventbridge",
    StepFunctionsTarget: "stepfunctions",
}


def kind_of(target: AwsTarget) -> Kind:
    return KINDS[TYPES[type(target)]]


def arn_of(target: AwsTarget) -> str:
    return str(getattr(target, kind_of(target).field))


def glob(pattern: str) -> re.Pattern[str]:
    """IAM's reading of a resource with wildcards: `*` is any run of characters."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def literal_prefix(entry: str, kind: Kind) -> str:
    """The resource name an entry's matches all start with (up to its first wildcard)."""
    match = kind.entry.fullmatch(entry)
    name = match.group(1) if match else entry
    return name.split("*", 1)[0]


@dataclass(frozen=True)
class ArnRule:
    """The allowed resources of one kind: ARN patterns, and name patterns (of any account, as in the local
    runtime; the stack resolves names into its own account's ARNs before the functions read them)."""

    kind: Kind
    arns: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    @classmethod
    def parse(cls, kind: Kind, spec: str) -> ArnRule:
        """The rule a setting describes; ValueError naming the entry that is neither an ARN nor a name
        pattern of `kind`, or whose name has no literal prefix (`*` alone would allow the stack's own)."""
        arns: list[str] = []
        names: list[str] = []
        for entry in (e.strip() for e in spec.split(",")):
            if not entry:
                continue
            if entry.startswith("arn:"):
                if not kind.entry.fullmatch(entry):
                    raise ValueError(f"{entry!r} is not the ARN of {kind.label} (arn:aws:{kind.service}:...)")
                arns.append(entry)
            elif re.fullmatch(f"{_PATTERN_CHARS}+", entry):
                names.append(entry)
            else:
                raise ValueError(f"{entry!r} is neither the ARN nor a name pattern of {kind.label}")
            if not literal_prefix(entry, kind):
                raise ValueError(f"{entry!r} must start with part of a name before any * (a name prefix)")
        return cls(kind, tuple(arns), tuple(names))

    def allows(self, arn: str) -> bool:
        match = self.kind.arn.fullmatch(arn)
        if match is None:
            return False
        name = match.group(1)
        return any(glob(p).fullmatch(arn) for p in self.arns) or any(glob(p).fullmatch(name) for p in self.names)


def refusal(target: AwsTarget, spec: str, *, stack_name: str = "") -> str | None:
    """Why `target` may not be used (None when it may): its ARN's shape, a resource of the stack itself
    (named `<stack name>-...` by CloudFormation), or one the stack setting `spec` does not list."""
    kind = kind_of(target)
    match = kind.arn.fullmatch(arn_of(target))
    if match is None:
        return f"is not the ARN of {kind.label} (arn:aws:{kind.service}:<region>:<account>:{kind.resource}<name>)"
    if stack_name and match.group(1).startswith(f"{stack_name}-"):
        return "is one of Hourglass's own resources"
    if not ArnRule.parse(kind, spec).allows(arn_of(target)):
        return f"is not an allowed target (the stack setting {kind.setting} lists the allowed ones)"
    return None


def overlaps_stack(entry: str, kind: Kind, stack_name: str) -> bool:
    """Whether an allow-list entry could match a resource of the stack (all named `<stack name>-...`)."""
    prefix, own = literal_prefix(entry, kind), f"{stack_name}-"
    return own.startswith(prefix) or prefix.startswith(own)


def execution_name(message_id: str, tag: str) -> str:
    """A Step Functions execution's name: one per message and `tag` (an attempt, or a failure notice's version),
    so that starting the same one again is refused by the service, not run twice. Within the service's 80
    characters: an id too long for that is replaced by its digest."""
    name = f"{message_id}-{tag}"
    if len(name) > MAX_EXECUTION_NAME:
        name = f"{hashlib.sha256(message_id.encode()).hexdigest()[:40]}-{tag}"
    return name
