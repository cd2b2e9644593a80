"""Exceptions raised by the SDK: one per HTTP error class, each carrying the contract's `code`."""

from __future__ import annotations

from typing import Any


class HourglassError(Exception):
    """An error answer of the API: `status` (HTTP), `code` (snake_case from the body), `message`."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    @property
    def label(self) -> str:
        """`<status> <code>`, or the code alone when no answer came (status 0)."""
        return f"{self.status} {self.code}" if self.status else self.code


class BadRequest(HourglassError):
    """400 / 413 / 415: the request was refused and nothing changed."""


class Unauthorized(HourglassError):
    """401 / 403: the API key is missing or wrong."""


class NotFound(HourglassError):
    """404: unknown queue, message, schedule, operation or route."""


class Conflict(HourglassError):
    """409: the message or schedule is not in a state that allows the change."""


class RateLimited(HourglassError):
    """429 after every retry."""


class Unavailable(HourglassError):
    """5xx after every retry (or at once where a retry could repeat a change)."""


class TransportError(HourglassError):
    """The server could not be reached (status 0, code `transport_error`)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "transport_error", message)


_BY_STATUS: dict[int, type[HourglassError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    405: NotFound,
    409: Conflict,
    413: BadRequest,
    415: BadRequest,
    429: RateLimited,
}


class NotJson(str):
    """The text of an answer that is not JSON."""


def from_response(status: int, body: Any, content_type: str | None = None) -> HourglassError:
    """The exception for an error response; `code`/`message` from `{"error": {...}}` when present. An answer
    that is not JSON (a web page from another server) is summed up in one line, never quoted whole."""
    error = body.get("error") if isinstance(body, dict) else None
    code = str(error.get("code")) if isinstance(error, dict) and error.get("code") else f"http_{status}"
    if isinstance(error, dict) and error.get("message"):
        message = str(error.get("message"))
    elif isinstance(body, NotJson):
        message = not_json(body, content_type)
    else:
        message = str(body or "")
    kind = _BY_STATUS.get(status) or (Unavailable if status >= 500 else HourglassError)
    return kind(status, code, message, body)


def not_json(text: str, content_type: str | None) -> str:
    """An answer that is not JSON in one line: its content type and its first line (cut at 100 characters)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = first if len(first) <= 100 else first[:99] + "…"
    return f"not a JSON answer ({content_type or 'no content type'}), first line: {first!r}"
