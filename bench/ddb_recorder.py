"""MiniStack with a DynamoDB request log: each request's operation and the item keys it touches, and the index
entries each item change writes, as JSON lines in $HOURGLASS_DDB_LOG. Runs in MiniStack's own venv
(`python -m bench.ddb_recorder`, started by bench.deployed_load): nothing of the project is imported.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from ministack.services import dynamodb

_out = open(os.environ["HOURGLASS_DDB_LOG"], "a", buffering=1 << 20)  # noqa: SIM115 (open for the process's life)
_lock = threading.Lock()
_handle_request = dynamodb.handle_request
_emit_stream_event = dynamodb._emit_stream_event


def _write(entry: dict[str, Any]) -> None:
    line = json.dumps(entry, separators=(",", ":"))
    with _lock:
        _out.write(line + "\n")


def _value(attribute: dict[str, Any] | None) -> str | None:
    return None if attribute is None else str(next(iter(attribute.values())))


def _key(item: dict[str, Any]) -> list[str | None]:
    return [_value(item.get("pk")), _value(item.get("sk"))]


def touched(op: str, request: dict[str, Any], response: dict[str, Any], index_hash: str | None) -> dict[str, list[Any]]:
    """{"w": keys written, "r": keys read, "c": keys condition-checked} of one request; an index Query's keys
    read carry the entry's index partition third."""
    got: dict[str, list[Any]] = {"w": [], "r": [], "c": []}
    if op == "PutItem":
        got["w"].append(_key(request.get("Item", {})))
    elif op in ("UpdateItem", "DeleteItem"):
        got["w"].append(_key(request.get("Key", {})))
    elif op == "GetItem":
        got["r"].append(_key(request.get("Key", {})))
    elif op == "BatchGetItem":
        got["r"] += [_key(k) for t in request.get("RequestItems", {}).values() for k in t.get("Keys", [])]
    elif op == "BatchWriteItem":
        for writes in request.get("RequestItems", {}).values():
            for w in writes:
                got["w"].append(_key(w["PutRequest"]["Item"] if "PutRequest" in w else w["DeleteRequest"]["Key"]))
    elif op in ("TransactWriteItems", "TransactGetItems"):
        for member in request.get("TransactItems", []):
            (kind, action), *_ = member.items()
            where = "c" if kind == "ConditionCheck" else ("r" if kind == "Get" else "w")
            got[where].append(_key(action.get("Item") or action.get("Key", {})))
    elif op in ("Query", "Scan"):
        tail = (lambda item: [_value(item.get(index_hash))]) if index_hash else (lambda item: [])
        got["r"] += [_key(item) + tail(item) for item in response.get("Items", [])]
    return got


def _index_hash(request: dict[str, Any]) -> str | None:
    """The partition key attribute of the index a request reads, if it names one."""
    if not request.get("IndexName"):
        return None
    table = dynamodb._tables.get(request.get("TableName", "")) or {}
    for gsi in table.get("GlobalSecondaryIndexes") or []:
        if gsi["IndexName"] == request["IndexName"]:
            return str(next(k["AttributeName"] for k in gsi["KeySchema"] if k["KeyType"] == "HASH"))
    return None


async def recorded_request(method: str, path: str, headers: dict, body: bytes, query_params: dict) -> tuple:
    started = time.time()
    status, response_headers, response_body = await _handle_request(method, path, headers, body, query_params)
    op = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
    try:
        request = json.loads(body) if body else {}
        response = json.loads(response_body) if op in ("Query", "Scan") and status == 200 else {}
        entry = {"t": started, "op": op, "status": status, "index": request.get("IndexName")}
        _write(entry | touched(op, request, response, _index_hash(request)))
    except Exception as exc:  # the log must never break the emulator
        _write({"t": started, "op": op, "error": repr(exc)})
    return status, response_headers, response_body


def _view(gsi: dict[str, Any], table_keys: set[str], item: dict | None) -> dict | None:
    """What the index holds of `item`: None when the item has not every key attribute of the index."""
    names = [k["AttributeName"] for k in gsi["KeySchema"]]
    if item is None or any(n not in item for n in names):
        return None
    projection = gsi.get("Projection", {})
    if projection.get("ProjectionType", "ALL") == "ALL":
        return item
    kept = set(names) | table_keys | set(projection.get("NonKeyAttributes", []))
    return {k: v for k, v in item.items() if k in kept}


def index_writes(table: dict[str, Any], old: dict | None, new: dict | None) -> list[list[Any]]:
    """[index, index partition, writes] of one item change: an entry put, removed, or rewritten because a
    projected attribute changed (2 when its index key moved: a delete and a put, as DynamoDB bills)."""
    table_keys = {k["AttributeName"] for k in table.get("KeySchema", [])}
    found = []
    for gsi in table.get("GlobalSecondaryIndexes") or []:
        before, after = _view(gsi, table_keys, old), _view(gsi, table_keys, new)
        if before == after:
            continue
        names = [k["AttributeName"] for k in gsi["KeySchema"]]
        moved = before is not None and after is not None and any(before[n] != after[n] for n in names)
        found.append([gsi["IndexName"], _value((after or before or {})[names[0]]), 2 if moved else 1])
    return found


def recorded_stream_event(
    table_name: str, event_name: str, old: dict | None, new: dict | None, *args: Any, **kwargs: Any
) -> Any:
    try:
        table = dynamodb._tables.get(table_name) or {}
        writes = index_writes(table, old, new)
        if writes:
            _write({"t": time.time(), "op": "index", "key": _key(new or old or {}), "gsi": writes})
    except Exception as exc:
        _write({"t": time.time(), "op": "index", "error": repr(exc)})
    return _emit_stream_event(table_name, event_name, old, new, *args, **kwargs)


def _flush_every_second() -> None:
    while True:
        time.sleep(1)
        with _lock:
            _out.flush()


def main() -> None:
    dynamodb.handle_request = recorded_request
    dynamodb._emit_stream_event = recorded_stream_event
    threading.Thread(target=_flush_every_second, daemon=True, name="ddb-recorder-flush").start()
    from ministack.app import main as ministack_main

    ministack_main()


if __name__ == "__main__":
    main()
