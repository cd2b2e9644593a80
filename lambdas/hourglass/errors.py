"""The project's own errors, shared by core, adapters and services."""

from __future__ import annotations


class HourglassError(Exception):
    """Base of every error Hourglass raises on purpose."""


class ValidationError(HourglassError):
    """Bad input: the field it is about, what is wrong with it (`detail`), and both as `message`."""

    def __init__(self, field: str, message: str, code: str = "invalid_request") -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message
        self.message = f"{field}: {message}" if field else message
        self.code = code


class NotFoundError(HourglassError):
    """The queue or message does not exist."""


class ConflictError(HourglassError):
    """The message is not in a state that allows the operation."""


class StaleVersionError(HourglassError):
    """A conditional write lost a race: somebody changed the item first."""


class StoreError(HourglassError):
    """DynamoDB failed after retries."""


class NewerFormatError(StoreError):
    """A stored record (or timer message) written by a newer release: this one neither reads nor rewrites it. A
    store error, so that every caller leaves it as it is and tries again later (docs/upgrades.md, rule 3)."""

    def __init__(self, kind: str, fv: int, newest: int) -> None:
        super().__init__(f"{kind} format {fv} is newer than {newest}, the newest this release reads")
        self.kind = kind
        self.fv = fv


class TimerQueueError(HourglassError):
    """The SQS timer queue refused a request after retries."""


class InvokeError(HourglassError):
    """Lambda refused to queue a fan-out invocation."""


class DeliveryError(HourglassError):
    """A delivery attempt failed; `retryable` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class BodyStoreError(StoreError):
    """A message body could not be written to, read from or removed from S3."""
