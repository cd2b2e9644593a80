"""Bulk operations: start one (202), read its document, the fan-out invocations that apply it page by page, and
the restart of segments whose worker died."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol

from hourglass.adapters import storage
from hourglass.core import admission, delivery_control, fanout, lifecycle, operations, validation
from hourglass.core.handoff import Placement
from hourglass.core.ids import is_valid_id, new_id
from hourglass.core.model import Message, Queue
from hourglass.core.operations import SEGMENTS, Action, MessageResult, Operation, OperationStatus, tally
from hourglass.core.redelivery import RedeliverRequest
from hourglass.errors import ConflictError, NotFoundError, StaleVersionError, StoreError, ValidationError
from hourglass.logs import log
from hourglass.service import transitions
from hourglass.service.admission import with_bodies as admitted_bodies
from hourglass.service.context import Context


class StorageUsed(storage.Queues, storage.Operations, storage.OperationSegments, Protocol):
    """The storage nouns this module uses (`adapters.storage`)."""


PAGE = 200
INVOCATIONS = 4  # per operation, each with SEGMENTS / INVOCATIONS segments
WRITERS = 4  # conditional writes in flight per segment
# An invocation stops after a page once less than this is left and re-invokes itself for the rest.
RESERVE_SECONDS = 15.0
Invoke = Callable[[dict[str, Any]], None]


def invocation_event(operation: Operation, segments: Sequence[int]) -> dict[str, Any]:
    return {"operation": operation.id, "queue": operation.queue, "segments": list(segments)}


def parse_invocation(event: Mapping[str, Any]) -> tuple[str, str, list[int]]:
    segments = event.get("segments")
    queue, operation_id = event.get("queue"), event.get("operation")
    if not isinstance(queue, str) or not isinstance(operation_id, str) or not isinstance(segments, list):
        raise ValueError("an operation's fan-out event needs operation, queue and segments")
    if not all(isinstance(i, int) and 0 <= i < SEGMENTS for i in segments):
        raise ValueError("segments out of range")
    return queue, operation_id, segments


class Operations:
    def __init__(self, ctx: Context, invoke: Invoke | None = None) -> None:
        self.ctx = ctx
        self.store: StorageUsed = ctx.store
        self._invoke = invoke

    @property
    def invoke(self) -> Invoke | None:
        """Read at call time: the local runtime wires its fan-out threads after building the API."""
        return self._invoke or self.ctx.invoke_fanout

    def start(self, queue_name: str, doc: Any) -> Operation:
        validation.queue_name(queue_name)
        request = operations.operation_request(doc)
        if self.store.get_queue(queue_name, consistent=True) is None:
            raise NotFoundError(f"queue {queue_name} does not exist")
        operation = Operation(new_id(), queue_name, request, self.ctx.clock())
        self.store.put_operation(operation)
        self._launch(operation, list(range(SEGMENTS)))
        return operation

    def _launch(self, operation: Operation, segments: list[int], time_left: Callable[[], float] = lambda: 60.0) -> None:
        for group in fanout.split(segments, INVOCATIONS):
            event = invocation_event(operation, group)
            if self.invoke is not None:
                self.invoke(event)
            else:  # no function to fan out to: the caller does the work itself
                self.work(event, time_left)

    def restart_stale(self, time_left: Callable[[], float] = lambda: 60.0) -> list[str]:
        """Re-invokes workers, from their cursors, for the segments of running operations whose worker has
        recorded no page for `WORKER_LEASE` (it crashed, timed out, or its re-invocation was lost); finishes
        an operation whose last segment ended just before its worker died. Returns the restarted ids.

        Called by every scheduled sweeper run: one Query of the running list when nothing runs.
        """
        now = self.ctx.clock()
        restarted: list[str] = []
        for queue, operation_id in self.store.running_operations():
            found = self.store.operation_workers(queue, operation_id)
            if found is None or found[0].status is not OperationStatus.RUNNING:
                self.store.forget_operation(queue, operation_id)
                continue
            operation, workers = found
            if not workers.remaining:
                self.store.finish_if_done(queue, operation_id, now)
                continue
            stale = workers.stale(operation.created_at, now)
            if not stale or not self.store.claim_segments(queue, operation_id, workers, stale, now):
                continue
            log("operation_restart", operation=operation_id, queue=queue, segments=stale)
            self.ctx.metrics.count("OperationRestarted", queue=queue)
            restarted.append(operation_id)
            try:
                self._launch(operation, stale, time_left)
            except StoreError as exc:  # its beats are now fresh: the next run after the lease tries again
                log("operation_restart_failed", operation=operation_id, queue=queue, error=str(exc))
        return restarted

    def get(self, queue_name: str, operation_id: str) -> Operation:
        validation.queue_name(queue_name)
        found = self.store.get_operation(queue_name, operation_id) if is_valid_id(operation_id) else None
        if found is None:
            raise NotFoundError(f"operation {operation_id} does not exist in queue {queue_name}")
        return found

    # fan-out invocations --------------------------------------------------------------------
    def work(self, event: Mapping[str, Any], time_left: Callable[[], float]) -> list[int]:
        """Runs the event's segments from their persisted cursors; returns the ones left for a new invocation."""
        queue, operation_id, segments = parse_invocation(event)
        operation = self.store.get_operation(queue, operation_id)
        if operation is None:
            return []
        with ThreadPoolExecutor(max_workers=max(1, len(segments))) as pool:
            done = list(pool.map(lambda seg: self._segment(operation, seg, time_left), segments))
        left = [seg for seg, finished in zip(segments, done, strict=True) if not finished]
        if left and self.invoke is not None:
            self.invoke(invocation_event(operation, left))
        return left

    def _segment(self, operation: Operation, segment: int, time_left: Callable[[], float]) -> bool:
        """Runs one segment page by page; True when it is done (or another worker recorded its page first)."""
        todo, cursor = self.store.operation_cursor(operation.queue, operation.id, segment)
        queue = self.store.get_queue(operation.queue)
        partitions = queue.partitions if queue is not None else 1
        request = operation.request
        statuses = request.filter.statuses(request.action)
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            while todo:
                if time_left() < RESERVE_SECONDS:
                    return False
                start = cursor
                page, cursor = self.store.segment_page(
                    operation.queue, segment, statuses, start, PAGE, operation_id=operation.id, partitions=partitions
                )
                now = self.ctx.clock()
                # A message this operation already wrote (a page redone after a crash) is counted, never
                # written again: a second shift would move it twice.
                done = [MessageResult.ALREADY_APPLIED for _, was in page if was]
                request = operation.request
                matching = [
                    m for m, was in page if not was and request.filter.matches(request.action, m.status, m.due_at)
                ]
                progress = tally([*done, *self._apply_page(operation, matching, now, pool)])
                if not self.store.record_page(
                    operation.queue, operation.id, segment, (start, cursor), progress, now=now
                ):
                    return True
                todo = cursor is not None
        return True

    def _apply_page(
        self, operation: Operation, messages: list[Message], now: datetime, pool: ThreadPoolExecutor
    ) -> list[MessageResult]:
        """One page: each message's transition planned, then written (conditionally, several at once), shift
        and redeliver handed off together (a rate-limited queue's timers paced in due order, one pacing write)."""
        if not messages or operation.request.action is Action.CANCEL:
            cancel = self._write(operation, None, None, now)
            return list(pool.map(lambda message: self._apply(operation, message, cancel)[0], messages))
        results: list[MessageResult] = []
        changes: dict[str, tuple[Message, lifecycle.Change]] = {}
        # Shift and redeliver write new versions: each is admitted against the queue's target as it is now.
        queue = self.store.get_queue(operation.queue)
        for message in admitted_bodies(self.ctx, messages, queue):
            try:
                change = self._change(operation, message, queue, now)
                admission.check(change.message, queue)
            except (ValueError, ValidationError, ConflictError) as exc:
                log("operation_skip", id=message.id, operation=operation.id, error=str(exc))
                results.append(MessageResult.SKIPPED)
                continue
            changes[message.id] = (message, change)
        applied: dict[str, MessageResult] = {}

        def write(version: Message, placement: Placement) -> Message | None:
            message, change = changes[version.id]
            write_one = self._write(operation, change, placement, now)
            applied[version.id], written = self._apply(operation, message, write_one)
            return written

        rate = delivery_control.rates(delivery_control.of(queue))
        versions = [change.message for _, change in changes.values()]
        self.ctx.handoff.written_first(versions, now, rate, write, each=pool.map)
        return results + list(applied.values())

    def _change(self, operation: Operation, message: Message, queue: Queue | None, now: datetime) -> lifecycle.Change:
        """The single-message transition of shift or redeliver, as its endpoint makes it (in its delivery window)."""
        action = operation.request.action
        if action is Action.SHIFT:
            assert operation.request.seconds is not None
            asked = operations.shifted_due(message.due_at, operation.request.seconds, now)
            retention = self.ctx.settings.retention
            due = admission.opening(message, queue, asked)
            return lifecycle.reschedule(
                message, due=due, body=message.body, now=now, retention=retention, scheduled=asked
            )
        asked = RedeliverRequest().due(now)
        return lifecycle.redeliver(message, admission.opening(message, queue, asked), asked)

    def _apply(
        self, operation: Operation, message: Message, write: Callable[[Message], Message | None]
    ) -> tuple[MessageResult, Message | None]:
        try:
            return MessageResult.APPLIED, write(message)
        except StaleVersionError:
            mark = self.store.last_op(message.queue, message.id)
            return (MessageResult.ALREADY_APPLIED if mark == operation.id else MessageResult.SKIPPED), None
        except (ValueError, ValidationError) as exc:
            log("operation_skip", id=message.id, operation=operation.id, error=str(exc))
            return MessageResult.SKIPPED, None

    def _write(
        self, operation: Operation, change: lifecycle.Change | None, placement: Placement | None, now: datetime
    ) -> Callable[[Message], Message | None]:
        """The single-message transition of the action (cancel, reschedule, redeliver) through the same home as
        its endpoint's, conditional on the version and marked with the operation; it returns the new version."""

        def write(message: Message) -> Message | None:
            if change is None or placement is None:
                transitions.cancel(self.ctx, message, now, operation=operation.id)
                return None
            if operation.request.action is Action.REDELIVER:
                return transitions.redeliver(self.ctx, message, change, placement, operation=operation.id)
            return transitions.revise(self.ctx, message, change, placement, now, operation=operation.id)

        return write
