"""Where a message body is kept: inline in the message item, in a body item written once, or in S3.

The message item changes state four times on the sweep path and DynamoDB bills each write by the
larger of the item before and after, per started KB; so a body rides along only while the item stays
within one write unit. Above that it is written once (docs/design.md, "Message bodies").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

WRITE_UNIT_BYTES = 1024
BODY_ATTRIBUTE = "body"


class Placement(StrEnum):
    INLINE = "inline"
    ITEM = "item"
    S3 = "s3"


@dataclass(frozen=True)
class BodyLimits:
    """The thresholds; the defaults are the break-even points worked out in docs/design.md."""

    # The message item, body included, must stay within this many bytes (one write unit) ...
    inline_item_max: int = WRITE_UNIT_BYTES
    # ... with room for what it gains after ingest: lease, delivered_at, expire_at, finished_at, a short last_error.
    headroom: int = 128
    # Bodies up to this many bytes go to a body item; larger ones to S3.
    item_body_max: int = 6 * 1024

    def __post_init__(self) -> None:
        if not 0 <= self.headroom < self.inline_item_max:
            raise ValueError("headroom must be below inline_item_max")
        if self.item_body_max < 1:
            raise ValueError("item_body_max must be positive")


DEFAULT_LIMITS = BodyLimits()
# Without an S3 bucket every body that does not fit inline goes to a body item (a DynamoDB item holds
# 400 KB, the API's largest body 256 KB).
NO_BUCKET_LIMITS = BodyLimits(item_body_max=300 * 1024)


@dataclass(frozen=True)
class BodyRef:
    """Where a message's body is kept when not inline: a body item or an S3 object, written at `version`."""

    placement: Placement
    version: int


# A body item outlives its message's own expiry by this much (TTL removes both; see body_expiry).
BODY_TTL_SLACK = timedelta(days=1)


def place(body_bytes: int, rest_bytes: int, limits: BodyLimits = DEFAULT_LIMITS) -> Placement:
    """Where a body of `body_bytes` (encoded JSON, UTF-8) goes, when the message item without its body
    attribute is `rest_bytes` (DynamoDB item size)."""
    if body_bytes < 0 or rest_bytes < 0:
        raise ValueError("sizes must not be negative")
    if rest_bytes + len(BODY_ATTRIBUTE) + body_bytes + limits.headroom <= limits.inline_item_max:
        return Placement.INLINE
    return Placement.ITEM if body_bytes <= limits.item_body_max else Placement.S3


def body_expiry(due_at: datetime, retention: timedelta) -> datetime:
    """TTL of a body item: removed (for free) a day after the message item of a message finished on
    time would be, so a finished message keeps its body as long as it is kept itself."""
    return due_at + retention + BODY_TTL_SLACK


def outlives(body_expires_at: datetime, finished_at: datetime, retention: timedelta) -> bool:
    """Whether a body item with this TTL outlives a message finished (or rescheduled to) `finished_at`;
    when not, the store extends the body item's TTL (one write) before the message moves on."""
    return body_expires_at >= finished_at + retention


# S3 bodies are kept until their message's own retention ends, by bucket lifecycle rules filtered on a
# tag set at PutObject (free): one rule per value of this ladder, day by day for two months, then doubling.
KEEP_TAG = "keep-days"
KEEP_DAYS_LADDER = (*range(1, 64), 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def keep_days(written_at: datetime, until: datetime) -> int:
    """The lifecycle tag value of an S3 body written at `written_at` that must be kept until `until`:
    the smallest rung of the ladder that covers it (objects expire `keep_days` days after creation)."""
    needed = max(1, -(-(until - written_at) // timedelta(days=1)))
    for rung in KEEP_DAYS_LADDER:
        if rung >= needed:
            return rung
    return KEEP_DAYS_LADDER[-1]
