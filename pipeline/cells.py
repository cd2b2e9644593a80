"""How the cells of a CSV or Parquet row become the message document the REST API would receive.

`body` and `target` are JSON text, or else a plain string; `delay`, `ttl` and `priority` are numbers. A cell
that does not parse is passed on as text, so validation rejects it by name instead of dropping it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from hourglass.core import validation
from hourglass.errors import ValidationError

COLUMNS = ("queue", "body", "delay", "deliver_at", "ttl", "dedup_id", "target", "flow_key", "priority")
REQUIRED = ("queue", "body")
_JSON_OR_TEXT = frozenset({"body", "target"})
_NUMBERS = frozenset({"delay", "ttl", "priority"})


def document(cells: Mapping[str, str | None]) -> str:
    """The JSON text of the document; absent (null) cells are left out."""
    doc: dict[str, object] = {}
    for name in COLUMNS:
        cell = cells.get(name)
        if cell is None:
            continue
        if name in _JSON_OR_TEXT:
            doc[name] = _json_or_text(cell)
        elif name in _NUMBERS:
            doc[name] = _number_or_text(cell)
        else:
            doc[name] = cell
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _json_or_text(cell: str) -> object:
    try:
        return validation.decode_json(cell)
    except ValidationError:
        return cell


def _number_or_text(cell: str) -> object:
    try:
        value = json.loads(cell)
    except ValueError:
        return cell
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or (isinstance(value, float) and not math.isfinite(value)):
        return cell
    return value
