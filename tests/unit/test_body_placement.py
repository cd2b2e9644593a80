"""Where a body goes: inline while the item stays within a write unit, a body item, then S3."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core.body_placement import (
    BODY_TTL_SLACK,
    BodyLimits,
    Placement,
    body_expiry,
    outlives,
    place,
)

LIMITS = BodyLimits(inline_item_max=1024, headroom=128, item_body_max=6144)
DUE = datetime(2026, 12, 1, tzinfo=UTC)
WEEK = timedelta(days=7)


def test_a_small_body_stays_inline() -> None:
    assert place(100, 300, LIMITS) is Placement.INLINE


def test_a_body_that_fits_the_write_unit_exactly_stays_inline() -> None:
    assert place(1024 - 128 - 300 - len("body"), 300, LIMITS) is Placement.INLINE


def test_one_byte_more_goes_to_a_body_item() -> None:
    assert place(1024 - 128 - 300 - len("body") + 1, 300, LIMITS) is Placement.ITEM


def test_a_large_rest_of_the_item_moves_even_a_small_body_out() -> None:
    assert place(100, 900, LIMITS) is Placement.ITEM


def test_a_body_at_the_item_limit_is_an_item() -> None:
    assert place(6144, 300, LIMITS) is Placement.ITEM


def test_a_body_above_the_item_limit_goes_to_s3() -> None:
    assert place(6145, 300, LIMITS) is Placement.S3


def test_the_largest_accepted_body_goes_to_s3() -> None:
    assert place(256 * 1024, 300) is Placement.S3


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        place(-1, 300, LIMITS)


def test_limits_with_no_room_for_a_body_are_refused() -> None:
    with pytest.raises(ValueError):
        BodyLimits(inline_item_max=100, headroom=100)


def test_a_body_item_expires_a_day_after_a_message_finished_on_time() -> None:
    assert body_expiry(DUE, WEEK) == DUE + WEEK + BODY_TTL_SLACK


def test_a_body_outlives_a_message_finished_within_the_slack() -> None:
    assert outlives(body_expiry(DUE, WEEK), DUE + timedelta(hours=23), WEEK)


def test_a_body_does_not_outlive_a_message_retried_past_the_slack() -> None:
    assert not outlives(body_expiry(DUE, WEEK), DUE + timedelta(days=2), WEEK)
