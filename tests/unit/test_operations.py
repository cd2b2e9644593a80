"""Bulk operations: request validation, filters, verdicts, shifting and the operation document."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.model import Status
from hourglass.core.operations import (
    SEGMENTS,
    WORKER_LEASE,
    Action,
    MessageResult,
    Operation,
    OperationFilter,
    OperationRequest,
    OperationStatus,
    Progress,
    Verdict,
    Workers,
    operation_doc,
    operation_request,
    segment_bounds,
    shifted_due,
    tally,
    verdict,
)
from hourglass.errors import ValidationError

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def field_of(doc: object) -> str:
    with pytest.raises(ValidationError) as info:
        operation_request(doc)
    return info.value.field


def test_cancel_request_with_a_due_window():
    request = operation_request(
        {
            "action": "cancel",
            "filter": {"status": "pending", "due_after": "2026-11-21T10:00:00Z", "due_before": "2026-11-21T11:00:00Z"},
        }
    )
    assert request == OperationRequest(
        Action.CANCEL, OperationFilter(Status.PENDING, T0, T0 + timedelta(hours=1)), None
    )


def test_shift_request_carries_its_seconds():
    request = operation_request({"action": "shift", "seconds": -600, "filter": {"status": "pending"}})
    assert (request.action, request.seconds) == (Action.SHIFT, -600.0)


def test_missing_filter_means_every_status_the_action_applies_to():
    request = operation_request({"action": "redeliver"})
    assert request.filter.statuses(Action.REDELIVER) == {Status.FAILED, Status.EXPIRED}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "body"),
        ({"action": "delete"}, "action"),
        ({"action": "cancel", "extra": 1}, "extra"),
        ({"action": "cancel", "seconds": 5}, "seconds"),
        ({"action": "shift"}, "seconds"),
        ({"action": "shift", "seconds": "60"}, "seconds"),
        ({"action": "shift", "seconds": 1e400}, "seconds"),
        ({"action": "cancel", "filter": "pending"}, "filter"),
        ({"action": "cancel", "filter": {"state": "pending"}}, "filter.state"),
        ({"action": "cancel", "filter": {"status": "failed"}}, "filter.status"),
        ({"action": "redeliver", "filter": {"status": "pending"}}, "filter.status"),
        ({"action": "redeliver", "filter": {"status": "delivered"}}, "filter.status"),
        ({"action": "cancel", "filter": {"due_after": "tomorrow"}}, "filter.due_after"),
        ({"action": "cancel", "filter": {"due_before": "2026-11-21T10:00:00"}}, "filter.due_before"),
        (
            {"action": "cancel", "filter": {"due_after": "2026-11-21T11:00:00Z", "due_before": "2026-11-21T10:00:00Z"}},
            "filter.due_before",
        ),
    ],
)
def test_bad_requests_name_their_field(doc, field):
    assert field_of(doc) == field


@pytest.mark.parametrize(
    ("action", "status", "expected"),
    [
        (Action.CANCEL, Status.PENDING, Verdict.APPLY),
        (Action.CANCEL, Status.DELIVERING, Verdict.SKIP),
        (Action.CANCEL, Status.CANCELLED, Verdict.SKIP),
        (Action.REDELIVER, Status.FAILED, Verdict.APPLY),
        (Action.REDELIVER, Status.EXPIRED, Verdict.APPLY),
        (Action.REDELIVER, Status.DELIVERED, Verdict.SKIP),
        (Action.REDELIVER, Status.PENDING, Verdict.SKIP),
        (Action.SHIFT, Status.PENDING, Verdict.APPLY),
        (Action.SHIFT, Status.DELIVERED, Verdict.SKIP),
    ],
)
def test_each_action_applies_only_to_its_statuses(action, status, expected):
    assert verdict(action, status) is expected


def test_filter_due_window_is_exclusive_at_both_ends():
    window = OperationFilter(Status.PENDING, T0, T0 + timedelta(hours=1))
    assert not window.matches(Action.CANCEL, Status.PENDING, T0)
    assert window.matches(Action.CANCEL, Status.PENDING, T0 + timedelta(seconds=1))
    assert not window.matches(Action.CANCEL, Status.PENDING, T0 + timedelta(hours=1))


def test_filter_does_not_match_statuses_outside_the_action():
    assert not OperationFilter().matches(Action.CANCEL, Status.FAILED, T0)


def test_shift_moves_the_due_time_but_never_before_now():
    due = T0 + timedelta(minutes=10)
    assert shifted_due(due, 3600, T0) == due + timedelta(hours=1)
    assert shifted_due(due, -60, T0) == due - timedelta(minutes=1)
    assert shifted_due(due, -3600, T0) == T0


def test_segments_cover_every_hex_id_once():
    ids = [f"{n:032x}" for n in range(0, 2**128, 2**124 + 12345)] + ["0" * 32, "f" * 32]
    for message_id in ids:
        key = f"m#{message_id}"
        owners = [n for n in range(SEGMENTS) if segment_bounds(n)[0] <= key <= segment_bounds(n)[1]]
        assert len(owners) == 1


def test_progress_adds_up():
    assert Progress(3, 2, 1) + Progress(4, 4, 0) == Progress(7, 6, 1)


def test_document_of_a_running_then_finished_operation():
    request = OperationRequest(Action.SHIFT, OperationFilter(Status.PENDING, None, T0), 3600.0)
    running = Operation("op1", "orders", request, T0, progress=Progress(10, 9, 1))
    assert operation_doc(running) == {
        "id": "op1",
        "queue": "orders",
        "action": "shift",
        "filter": {"status": "pending", "due_before": "2026-11-21T10:00:00.000Z"},
        "seconds": 3600,
        "status": "running",
        "matched": 10,
        "applied": 9,
        "skipped": 1,
        "created_at": "2026-11-21T10:00:00.000Z",
        "finished_at": None,
    }
    done = running.finish(T0 + timedelta(minutes=2))
    assert (operation_doc(done)["status"], operation_doc(done)["finished_at"]) == (
        OperationStatus.SUCCEEDED.value,
        "2026-11-21T10:02:00.000Z",
    )


def test_a_failed_operation_shows_its_error():
    request = OperationRequest(Action.CANCEL, OperationFilter(), None)
    failed = Operation("op1", "orders", request, T0).finish(T0, error="queue deleted")
    assert (operation_doc(failed)["status"], operation_doc(failed)["error"]) == ("failed", "queue deleted")


def test_a_page_counts_applied_skipped_and_redone_messages():
    page = [MessageResult.APPLIED, MessageResult.SKIPPED, MessageResult.ALREADY_APPLIED, MessageResult.APPLIED]
    assert tally(page) == Progress(matched=4, applied=3, skipped=1)


def test_an_empty_page_counts_nothing():
    assert tally([]) == Progress()


@pytest.mark.parametrize("action", [{}, [], ["cancel"], 1, None])
def test_an_action_that_is_not_a_string_is_refused_naming_the_field(action: object) -> None:
    with pytest.raises(ValidationError) as refused:
        operation_request({"action": action})
    assert refused.value.field == "action"


def test_stale_segments_are_those_still_to_do_whose_worker_is_silent_past_the_lease():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    now = created + WORKER_LEASE + timedelta(seconds=30)
    workers = Workers(
        remaining=frozenset({1, 2, 3}),
        beats={1: now - timedelta(seconds=10), 2: now - WORKER_LEASE, 5: created},
    )
    # 1 beat recently, 2 just reached its lease, 3 never beat (counts from creation), 5 is done
    assert workers.stale(created, now) == [2, 3]
