"""Bodies as JSON: strict decoding that refuses what later encoding or storage could not carry, and the one
compact encoding in which Hourglass stores, sends and measures them.

Refused: not UTF-8, not JSON, NaN/Infinity or numbers out of float range (`1e400`), duplicate keys,
lone surrogates, nesting deeper than MAX_DEPTH, and bodies over the byte limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from hourglass.errors import ValidationError

MAX_REQUEST_BYTES = 6 * 1024 * 1024
# Far below the interpreter's recursion limit, so every later json.dumps/loads of a body succeeds.
MAX_DEPTH = 100
# A \uD800-\uDFFF escape may decode to a lone surrogate, which cannot be encoded as UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise _DuplicateKey(key)
        doc[key] = value
    return doc


def encode(value: Any) -> str:
    """Compact JSON without ASCII escaping: what is stored, sent, and measured in UTF-8 bytes."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def decode(raw: bytes | str | None, *, limit: int = MAX_REQUEST_BYTES) -> Any:
    """The request body as JSON, or a ValidationError on `body` saying what is wrong."""
    if raw is None or raw == b"" or raw == "":
        raise ValidationError("body", "request body is required")
    if len(raw) > limit:
        raise ValidationError("body", f"request body is larger than {limit} bytes", code="too_large")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite, object_pairs_hook=_unique)
        if _SURROGATE_ESCAPE.search(text):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeError as exc:
        raise ValidationError("body", "request body is not valid UTF-8") from exc
    except RecursionError as exc:
        raise ValidationError("body", "request body is nested too deeply") from exc
    except _DuplicateKey as exc:
        key = json.dumps(exc.key, ensure_ascii=False)[:80]
        raise ValidationError("body", f"the key {key} appears twice in one object") from exc
    except ValueError as exc:
        raise ValidationError("body", f"request body is not valid JSON ({exc})") from exc
    if _too_deep(value):
        raise ValidationError("body", f"request body is nested more than {MAX_DEPTH} levels deep")
    return value


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False
