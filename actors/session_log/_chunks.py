"""Packed chunk rows: the storage-only encoding of `assistant/chunk` delta runs.

`session-log-format` §5.2. A run of at least three consecutive `assistant/chunk`
events of one delta kind, in one block, with consecutive seqs, exact key sets and integer
times is stored as one row (`text-chunks`, `reasoning-chunks` or `tool-call-chunks`).
Rows are never events: readers expand them back to the exact original events, and a
malformed row is an error, never silently skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

from actors.session_log._json import MAX_SAFE_INTEGER, safe_int

__all__ = [
    "MIN_RUN",
    "ROW_TYPES",
    "MalformedRowError",
    "expand_row",
    "pack_chunk_runs",
    "validate_row",
]

MIN_RUN = 3
"""Minimum members before a run packs; a format constant (both layouts read the same)."""

ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""The bare (slash-less) tags of packed rows."""

_STR: frozenset[type] = frozenset({str})
_INT: frozenset[type] = frozenset({int})
_DELTA_OF_ROW = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_ROW_OF_DELTA = {delta: row for row, delta in _DELTA_OF_ROW.items()}
_ROW_KEYS = frozenset({"type", "seq0", "time0", "data"})
_TEXT_DATA_KEYS = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_DATA_KEYS = frozenset({"turn", "step", "index", "id", "dt", "args"})
_TOOL_DATA_KEYS_NAMED = _TOOL_DATA_KEYS | {"name"}
_EVENT_KEYS = frozenset({"type", "seq", "time", "data"})
_CHUNK_DATA_KEYS = frozenset({"turn", "step", "chunk"})
_TEXT_CHUNK_KEYS = frozenset({"type", "index", "text"})
_TOOL_CHUNK_KEYS = frozenset({"type", "index", "id", "argumentsDelta"})
_TOOL_CHUNK_KEYS_NAMED = _TOOL_CHUNK_KEYS | {"name"}


class MalformedRowError(ValueError):
    """A row-tagged line fails the strict row validation (§5.2)."""


def _is_number(value: object) -> bool:
    # JS `typeof x === 'number'`; Python bools are ints but not JS numbers.
    return type(value) in (int, float)


def _malformed(tag: str, why: str) -> MalformedRowError:
    return MalformedRowError(f"malformed {tag} storage row: {why}")


def validate_row(value: Mapping[str, Any]) -> int:
    """Validate a row-tagged value exactly as upstream's decoder does.

    Args:
        value: a parsed line whose `type` is one of `ROW_TYPES`.

    Returns:
        The number of events the row stores.

    Raises:
        MalformedRowError: the envelope, data keys, payload or bounds are wrong.
    """
    tag = value["type"]
    if value.keys() != _ROW_KEYS:
        raise _malformed(tag, "envelope must be exactly {type, seq0, time0, data}")
    seq0 = safe_int(value["seq0"])
    if seq0 is None or seq0 < 0:
        raise _malformed(tag, "seq0 must be a non-negative safe integer")
    time = safe_int(value["time0"])
    if time is None:
        raise _malformed(tag, "time0 must be a safe integer")
    data = value["data"]
    if not isinstance(data, dict):
        raise _malformed(tag, "data must be an object")
    if tag == "tool-call-chunks":
        keys = data.keys()
        named = keys == _TOOL_DATA_KEYS_NAMED
        if not named and keys != _TOOL_DATA_KEYS:
            raise _malformed(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        if not isinstance(data["id"], str) or (named and not isinstance(data["name"], str)):
            raise _malformed(tag, "id (and name when present) must be strings")
        payload_key = "args"
    else:
        if data.keys() != _TEXT_DATA_KEYS:
            raise _malformed(tag, "data must be exactly {turn, step, index, dt, texts}")
        payload_key = "texts"
    if not (_is_number(data["turn"]) and _is_number(data["step"]) and _is_number(data["index"])):
        raise _malformed(tag, "turn/step/index must be numbers")
    payload = data[payload_key]
    # set(map(type, …)) keeps these per-member checks in C: rows hold hundreds of members.
    if not isinstance(payload, list) or not payload or not set(map(type, payload)) <= _STR:
        raise _malformed(tag, f"{payload_key} must be a non-empty string array")
    gaps = data["dt"]
    if not isinstance(gaps, list):
        raise _malformed(tag, "dt must be an array of safe integers")
    if gaps and not (set(map(type, gaps)) <= _INT and _within_safe(min(gaps), max(gaps))):
        if any(safe_int(gap) is None for gap in gaps):
            raise _malformed(tag, "dt must be an array of safe integers")
        gaps = [int(gap) for gap in gaps]  # integral floats such as 1.0
    if len(gaps) != len(payload) - 1:
        raise _malformed(tag, f"dt length {len(gaps)} does not match {len(payload)} members")
    if safe_int(seq0 + len(payload) - 1) is None:
        raise _malformed(tag, "member seqs must stay safe integers")
    # "a running value that leaves safe range is outside any encoder's image"
    times = list(accumulate(gaps, initial=time))
    if not _within_safe(min(times), max(times)):
        raise _malformed(tag, "member times must stay safe integers")
    return len(payload)


def _within_safe(low: int, high: int) -> bool:
    return -MAX_SAFE_INTEGER <= low and high <= MAX_SAFE_INTEGER


def expand_row(value: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Expand a validated row into its exact original `assistant/chunk` events (§5.2)."""
    tag = value["type"]
    data = value["data"]
    turn, step, index = data["turn"], data["step"], data["index"]
    seq = int(value["seq0"])
    time = int(value["time0"])
    gaps = data["dt"]
    events: list[dict[str, Any]] = []
    if tag == "tool-call-chunks":
        call_id = data["id"]
        has_name = "name" in data
        name = data.get("name")
        for k, fragment in enumerate(data["args"]):
            if k:
                time += int(gaps[k - 1])
            chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": call_id}
            if has_name:
                chunk["name"] = name
            chunk["argumentsDelta"] = fragment
            events.append(_chunk_event(seq + k, time, turn, step, chunk))
        return events
    delta = _DELTA_OF_ROW[tag]
    for k, text in enumerate(data["texts"]):
        if k:
            time += int(gaps[k - 1])
        chunk = {"type": delta, "index": index, "text": text}
        events.append(_chunk_event(seq + k, time, turn, step, chunk))
    return events


def _chunk_event(
    seq: int, time: int, turn: Any, step: Any, chunk: dict[str, Any]
) -> dict[str, Any]:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": time,
        "data": {"turn": turn, "step": step, "chunk": chunk},
    }


def _classify(event: Mapping[str, Any]) -> str | None:
    # The encoder whitelists exact shapes; anything else is stored verbatim, so unknown
    # fields or future chunk variants lose compression, never data.
    if event.get("type") != "assistant/chunk" or event.keys() != _EVENT_KEYS:
        return None
    seq = event["seq"]
    if type(seq) is not int or seq < 0 or safe_int(seq) is None:
        return None
    if type(event["time"]) is not int or safe_int(event["time"]) is None:
        return None
    data = event["data"]
    if not isinstance(data, dict) or data.keys() != _CHUNK_DATA_KEYS:
        return None
    if not (_is_number(data["turn"]) and _is_number(data["step"])):
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, dict) or not _is_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        ok = chunk.keys() == _TEXT_CHUNK_KEYS and isinstance(chunk["text"], str)
        return str(kind) if ok else None
    if kind == "tool-call-delta":
        keys = chunk.keys()
        shape = keys == _TOOL_CHUNK_KEYS or (
            keys == _TOOL_CHUNK_KEYS_NAMED and isinstance(chunk["name"], str)
        )
        ok = shape and isinstance(chunk["id"], str) and isinstance(chunk["argumentsDelta"], str)
        return "tool-call-delta" if ok else None
    return None


def _continues(prev: Mapping[str, Any], nxt: Mapping[str, Any], kind: str) -> bool:
    if nxt["seq"] != prev["seq"] + 1:
        return False
    if safe_int(nxt["time"] - prev["time"]) is None:
        return False
    a, b = prev["data"], nxt["data"]
    if a["turn"] != b["turn"] or a["step"] != b["step"]:
        return False
    if a["chunk"]["index"] != b["chunk"]["index"]:
        return False
    if kind != "tool-call-delta":
        return True
    ca, cb = a["chunk"], b["chunk"]
    # "name must match in presence AND value — a mixed run is not representable"
    return bool(
        ca["id"] == cb["id"]
        and ("name" in ca) == ("name" in cb)
        and ca.get("name") == cb.get("name")
    )


def _build_row(kind: str, run: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    first = run[0]
    chunk = first["data"]["chunk"]
    data: dict[str, Any] = {
        "turn": first["data"]["turn"],
        "step": first["data"]["step"],
        "index": chunk["index"],
        "dt": [run[i]["time"] - run[i - 1]["time"] for i in range(1, len(run))],
    }
    if kind == "tool-call-delta":
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [event["data"]["chunk"]["argumentsDelta"] for event in run]
    else:
        data["texts"] = [event["data"]["chunk"]["text"] for event in run]
    return {"type": _ROW_OF_DELTA[kind], "seq0": first["seq"], "time0": first["time"], "data": data}


def pack_chunk_runs(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pack one write batch for storage (upstream `packChunkRuns`).

    Each run of at least `MIN_RUN` consecutive whitelisted same-kind, same-block delta
    chunk events becomes one row; every other event passes through verbatim, in order.
    Runs split by flush boundaries simply pack per batch.
    """
    out: list[Mapping[str, Any]] = []
    kind: str | None = None
    run: list[Mapping[str, Any]] = []

    def flush() -> None:
        if kind is not None and len(run) >= MIN_RUN:
            out.append(_build_row(kind, run))
        else:
            out.extend(run)

    for event in events:
        k = _classify(event)
        if k is None:
            flush()
            kind, run = None, []
            out.append(event)
            continue
        if k == kind and run and _continues(run[-1], event, k):
            run.append(event)
            continue
        flush()
        kind, run = k, [event]
    flush()
    return out
