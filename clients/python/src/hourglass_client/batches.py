"""Create requests: messages grouped so that each request holds at most 100 and fits the API's size limit."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from hourglass_client.transport import encode

MAX_BATCH = 100  # contract: 1 to 100 messages per request
# Contract v1.1: a request reaches the API inside a Lambda event, and Lambda takes at most 6 MB
# (6 MiB); the event's other fields (headers, request context) get 64 KiB of it.
MAX_REQUEST_BYTES = 6 * 1024 * 1024 - 64 * 1024
Entry = Mapping[str, Any]


def event_bytes(doc: Any) -> int:
    """The size `doc` takes as a request body inside the Lambda event: JSON, escaped once more as a string."""
    return len(json.dumps(encode(doc).decode()))


_EMPTY = event_bytes({"messages": []})
_SEPARATOR = len(", ")


def chunks(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """`entries` in order, in requests of at most MAX_BATCH and MAX_REQUEST_BYTES (one entry larger
    than that goes alone, for the API to refuse by name)."""
    chunk: list[Entry] = []
    size = _EMPTY
    for entry in entries:
        cost = event_bytes(entry) - 2 + _SEPARATOR  # less the quotes around a string of its own
        if chunk and (len(chunk) == MAX_BATCH or size + cost > MAX_REQUEST_BYTES):
            yield chunk
            chunk, size = [], _EMPTY
        chunk.append(entry)
        size += cost
    if chunk:
        yield chunk
