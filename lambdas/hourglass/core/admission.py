"""Admission: the one gate of every message version (POST, `/create`, schedules and their occurrences, PATCH,
redelivery, bulk shift and redeliver, the bulk writer): its due time (in its delivery window), its expiry, its flow
key and priority, and AWS's limits everywhere it can reach. A refusal is a 4xx naming the field; where its body goes
is the store's `place_body`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hourglass.core import delivery_control, lifecycle, limits, schedule
from hourglass.core import window as windows
from hourglass.core.model import Message, NewMessage, Queue, Status, carried, kept, past_expiry
from hourglass.core.recurrence import Schedule
from hourglass.errors import ValidationError

# Contract v1.2: a flow key is 1-128 characters; a priority 0-9, 9 first.
MAX_FLOW_KEY = 128
MIN_PRIORITY, MAX_PRIORITY = 0, 9


@dataclass(frozen=True)
class Fields:
    """How a refusal names the message's fields in the request that carried it."""

    body: str = "body"
    target: str = "target"
    flow_key: str = "flow_key"
    priority: str = "priority"

    @classmethod
    def in_batch(cls, index: int) -> Fields:
        head = f"messages[{index}]."
        return cls(head + "body", head + "target", head + "flow_key", head + "priority")


def check(message: Message, queue: Queue | None, fields: Fields = Fields()) -> None:
    """Refuses a version whose flow key or priority is out of range (400), or that would not fit a place it
    can reach (413): its DynamoDB item (`limits.check_message`), its target's SQS message. Its timers carry
    only ids and its flow key, and its failure notice always fits its destination: a notice too large for it
    goes without the body (`failure_notice.notice_text`)."""
    check_flow(message.flow_key, message.priority, fields)
    queue_target = queue.settings.target if queue is not None else None
    limits.check_message(message, queue_target=queue_target, body_field=fields.body, target_field=fields.target)


def check_flow(flow_key: str | None, priority: int, fields: Fields = Fields()) -> None:
    """The flow key (None: the queue's shared key) and priority of a message or schedule."""
    if flow_key is not None and not (isinstance(flow_key, str) and 1 <= len(flow_key) <= MAX_FLOW_KEY):
        raise ValidationError(fields.flow_key, f"must be a string of 1 to {MAX_FLOW_KEY} characters")
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValidationError(fields.priority, f"must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}")


def admit(queue: Queue, request: NewMessage, now: datetime, message_id: str, fields: Fields = Fields()) -> Message:
    """The new message of `request`, checked; one due after its expiry is stored as expired, never delivered."""
    message = _new(queue, request, now, message_id)
    check(message, queue, fields)
    return message


def window(message: Message | NewMessage, queue: Queue | None) -> windows.Window | None:
    """The delivery window a message's attempts start in: its own (its request's or schedule's), else its queue's."""
    return message.window if message.window is not None else delivery_control.of(queue).window


def plan_window(plan: Schedule, queue: Queue | None) -> windows.Window | None:
    """The delivery window of a schedule's occurrences: its own, else its queue's (as `window` for each)."""
    return plan.window if plan.window is not None else delivery_control.of(queue).window


def opening(message: Message | NewMessage, queue: Queue | None, at: datetime) -> datetime:
    """When a version of `message` due at `at` may start: `at` itself, or its window's next opening (`core.window`).
    Every due time a version gets passes here: at admission, PATCH, redelivery, bulk shift, and retries
    (`next_attempt.after_failure`); the dispatcher checks it again at the start."""
    return windows.opening(window(message, queue), at)


def occurrence(plan: Schedule, queue: Queue, at: datetime, now: datetime) -> Message:
    """The occurrence of `plan` at `at`: admitted with its schedule (`admit_schedule`), not again when stored."""
    request = NewMessage(body=plan.body, deliver_at=plan.due(at), schedule=plan.name, occurrence_at=at, **carried(plan))
    return _new(queue, request, now, plan.occurrence_id(at))


def admit_schedule(plan: Schedule, queue: Queue, now: datetime) -> None:
    """A schedule is admitted as its occurrences will be: each has the same size (ids and times are of fixed
    length), and the schedule item is no larger than an occurrence's (its rule is within FIXED_ITEM_BYTES)."""
    check(occurrence(plan, queue, plan.next_after(now) or now, now), queue)


def _new(queue: Queue, request: NewMessage, now: datetime, message_id: str) -> Message:
    asked = schedule.due_time(
        now, delay=request.delay, deliver_at=request.deliver_at, default_delay=queue.settings.default_delay
    )
    due = opening(request, queue, asked)
    ttl = request.ttl if request.ttl is not None else queue.settings.ttl
    # An occurrence lives from its own time: stored one period early, it must not expire before it is due.
    origin = request.occurrence_at or now
    expires = origin + timedelta(seconds=ttl) if ttl is not None else None
    return Message(
        id=message_id,
        queue=queue.name,
        body=request.body,
        status=Status.EXPIRED if past_expiry(expires, due) else Status.PENDING,
        created_at=now,
        due_at=due,
        scheduled_at=lifecycle.scheduled_at(asked, due),
        expires_at=expires,
        queue_epoch=queue.created_at,
        **kept(request),
    )
