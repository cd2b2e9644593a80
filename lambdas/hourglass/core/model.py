"""Domain types: statuses, targets, retry policies, queues, their delivery control and messages."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hourglass.core.attempts import Attempt

from hourglass.core import keys
from hourglass.core.body_placement import BodyRef
from hourglass.core.window import Window

JSON = Any
LATER_NAMESPACE = keys.LATER_QUEUE


class Status(StrEnum):
    PENDING = "pending"
    DELIVERING = "delivering"
    DELIVERED = "delivered"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def finished(self) -> bool:
        return self in FINISHED


FINISHED = frozenset({Status.DELIVERED, Status.FAILED, Status.CANCELLED, Status.EXPIRED})


@dataclass(frozen=True)
class HttpTarget:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    type: str = "http"


@dataclass(frozen=True)
class SqsTarget:
    queue_url: str
    type: str = "sqs"


@dataclass(frozen=True)
class LaterTarget:
    """A `later` callback: success only when the reply is JSON with code 100."""

    url: str
    type: str = "later"


@dataclass(frozen=True)
class LambdaTarget:
    """A Lambda function, invoked asynchronously (`Event`) with the SQS envelope as its event."""

    function_arn: str
    type: str = "lambda"


@dataclass(frozen=True)
class SnsTarget:
    topic_arn: str
    type: str = "sns"


@dataclass(frozen=True)
class EventBridgeTarget:
    """An event bus: the envelope is the event's `detail`, with this source and detail type."""

    event_bus_arn: str
    source: str = "hourglass"
    detail_type: str = "Hourglass Message"
    type: str = "eventbridge"


@dataclass(frozen=True)
class StepFunctionsTarget:
    """A state machine: one execution per attempt, named after the message id and attempt."""

    state_machine_arn: str
    type: str = "stepfunctions"


# Targets reached through an AWS service API under IAM (core.aws_targets); no signature.
AwsTarget = LambdaTarget | SnsTarget | EventBridgeTarget | StepFunctionsTarget
Target = HttpTarget | SqsTarget | LaterTarget | AwsTarget


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_base: float = 1.0
    backoff_max: float = 3600.0


LATER_BACKOFF_BASE = 10.0
# `later` doubles without a ceiling; a year bounds it so the arithmetic stays finite.
LATER_BACKOFF_MAX = 365 * 86400.0


@dataclass(frozen=True)
class QueueSettings:
    default_delay: float = 0.0
    max_delay: float = 31536000.0
    ttl: float | None = None
    target: Target | None = None
    retry: RetryPolicy = RetryPolicy()
    signing_secret: str | None = None
    # The secret a rotation moves to: while set, callbacks carry a signature with each secret.
    signing_secret_next: str | None = None

    @property
    def signing_secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.signing_secret, self.signing_secret_next) if s is not None)


FailureDestination = HttpTarget | SqsTarget | AwsTarget
# A message's priority when none is given (0-9, 9 first); it matters only where limits hold messages back.
DEFAULT_PRIORITY = 5


@dataclass(frozen=True)
class FlowControl:
    """Limits per `flow_key` of a queue (v1.2), each kept with the queue-wide ones; None: no such limit."""

    key_rate_limit: float | None = None
    key_max_concurrency: int | None = None


ON_FAILURE = ("continue", "hold")


@dataclass(frozen=True)
class Ordering:
    """Ordered delivery per key (v1.3): one message of a flow key at a time, in due order (`core.ordering`);
    `on_failure` "hold" keeps the key's later messages back after a failed one until it is dealt with."""

    by: str = "flow_key"
    on_failure: str = "continue"


@dataclass(frozen=True)
class CircuitBreaker:
    """When a queue pauses itself (v1.2): at least `min_attempts` attempts ended in the last `window` seconds
    and at least `failure_ratio` of them failed or were retried (`core.circuit_breaker`)."""

    failure_ratio: float = 0.5
    min_attempts: int = 20
    window: int = 300


@dataclass(frozen=True)
class DeliveryControl:
    """A queue's delivery control (v1.1); its bounds and pause timing are in `core.delivery_control`."""

    rate_limit: float | None = None
    max_concurrency: int | None = None
    timeout: float = 15.0
    failure_destination: FailureDestination | None = None
    paused: bool = False
    # When attempts may start (`core.window`); a message's or schedule's own window replaces it.
    window: Window | None = None
    circuit_breaker: CircuitBreaker | None = None
    # Why it is paused when the queue paused itself ("circuit_breaker"); None for a pause by request.
    paused_reason: str | None = None
    # The last resume: the breaker counts only attempts after it (a fresh window).
    resumed_at: datetime | None = None
    flow_control: FlowControl | None = None
    ordering: Ordering | None = None
    # Where the queue's slots start (µs) since a PUT moved them to other pacing items (`pacing.queue_state`):
    # the old items' next free slot, so slots of before and after are a spacing apart. Kept by the service.
    pace_floor_us: int | None = None

    @property
    def limited(self) -> bool:
        """Whether attempts need the pacing or lease items; queues without limits pay nothing extra."""
        return self.paced or self.limits_concurrency

    @property
    def limits_concurrency(self) -> bool:
        """Whether an attempt takes a lease slot (queue-wide or per key) before it begins."""
        return self.max_concurrency is not None or self.key_max_concurrency is not None

    @property
    def paced(self) -> bool:
        """Whether hand-offs take start slots: a queue-wide or a per-key rate limit."""
        return self.rate_limit is not None or self.key_rate_limit is not None

    @property
    def key_rate_limit(self) -> float | None:
        return None if self.flow_control is None else self.flow_control.key_rate_limit

    @property
    def key_max_concurrency(self) -> int | None:
        return None if self.flow_control is None else self.flow_control.key_max_concurrency


@dataclass(frozen=True)
class Queue:
    name: str
    settings: QueueSettings
    created_at: datetime
    # Delivery control (v1.1); None is the default control (`delivery_control.of`).
    control: DeliveryControl | None = None
    # Bumped by every write of the queue item, each conditional on the one it read (0: never stored).
    version: int = 0
    # How many partitions its new messages are spread over (`core/message_partitions.py`): 1 until it is busy.
    partitions: int = 1
    # Where its concurrency slots are (`keys.slot_pk`): 2 (spread) for a queue created by 1.3.0 or later, for life.
    slot_layout: int = 1


class NoticeStatus(StrEnum):
    PENDING = "pending"
    ABANDONED = "abandoned"


@dataclass(frozen=True)
class Notice:
    """The failure notice a finished message still owes (in the outbox until `next_try_at`) or gave up on."""

    status: NoticeStatus
    tries: int = 0
    last_error: str | None = None
    next_try_at: datetime | None = None
    # When the message ended, as the notice says; kept once a try failed (the entry's key then moves).
    finished_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Carried:
    """What a message carries as its client set it, on the message or on its schedule for every occurrence.
    With `MessageFields` it is the one declaration of a message's fields: admission copies them, validation
    accepts them and the documents show them (`dataclasses.fields`); a new one needs only its rule in
    `core.validation` (and its item attribute in `adapters.items`)."""

    target: Target | None = None
    # Its own delivery window, which replaces its queue's (`admission.window`).
    window: Window | None = None
    # Flow control (v1.2): the key whose limits it shares, and who goes first when limits hold it back.
    flow_key: str | None = None
    priority: int = DEFAULT_PRIORITY


# The metadata of a field Hourglass sets, never a client: not accepted in a request.
INTERNAL = {"internal": True}


@dataclass(frozen=True, kw_only=True)
class MessageFields(Carried):
    """What a message keeps of its request, as given (its body is each type's own first field)."""

    dedup_id: str | None = None
    # A `later` task's topic and retry policy; a schedule occurrence's schedule and own time (retries move due_at).
    topic: str | None = field(default=None, metadata=INTERNAL)
    retry: RetryPolicy | None = field(default=None, metadata=INTERNAL)
    schedule: str | None = field(default=None, metadata=INTERNAL)
    occurrence_at: datetime | None = field(default=None, metadata=INTERNAL)


def carried(item: Carried) -> dict[str, Any]:
    """The fields of `Carried` of a message, a request or a schedule, as keyword arguments."""
    return {f.name: getattr(item, f.name) for f in fields(Carried)}


def kept(request: MessageFields) -> dict[str, Any]:
    """The fields of `MessageFields` of a request, as the keyword arguments of its message."""
    return {f.name: getattr(request, f.name) for f in fields(MessageFields)}


def client_fields(kind: type[Any]) -> frozenset[str]:
    """The fields of a request type a client sets (those Hourglass sets left out)."""
    return frozenset(f.name for f in fields(kind) if not f.metadata.get("internal"))


@dataclass(frozen=True)
class NewMessage(MessageFields):
    """A validated message request, before it has an id or a due time."""

    body: JSON
    delay: float | None = None
    deliver_at: datetime | None = None
    ttl: float | None = None


def past_expiry(expires_at: datetime | None, at: datetime) -> bool:
    """Whether `at` is after the expiry `expires_at` (None: it never expires); at the expiry itself it is in time."""
    return expires_at is not None and at > expires_at


@dataclass(frozen=True)
class Message(MessageFields):
    """A message version: what it keeps of its request (`MessageFields`) and what Hourglass made of it."""

    id: str
    queue: str
    body: JSON
    status: Status
    created_at: datetime
    due_at: datetime
    version: int = 1
    expires_at: datetime | None = None
    attempts: int = 0
    delivered_at: datetime | None = None
    # When it ended, for an ending no attempt dates (a cancel, an expiry or failure before an attempt).
    finished_at: datetime | None = None
    last_error: str | None = None
    queue_epoch: datetime | None = None
    claimed_until: datetime | None = None
    # Attempts made before the last redelivery: the retry budget counts `attempts - attempts_base`.
    attempts_base: int = 0
    # Where the body is kept when not inline (docs/design.md, "Message bodies"); the store fills `body`.
    body_ref: BodyRef | None = field(default=None, compare=False)
    # A finished message's last attempt, written with its outcome (earlier ones are history items).
    final_attempt: Attempt | None = None
    # The failure notice of this version (written only by the outbox; a new version starts without).
    notice: Notice | None = field(default=None, compare=False)
    # Made pending again by an explicit redelivery: delivered even if its schedule has moved on since.
    redelivered: bool = False
    # The time it was scheduled for (admission, PATCH, redelivery), kept while retries or deferrals move
    # `due_at`, the time it is next due; None: the same as `due_at`.
    scheduled_at: datetime | None = None

    @property
    def scheduled(self) -> datetime:
        """The time this message was scheduled for (the document's `due_at`)."""
        return self.scheduled_at or self.due_at
