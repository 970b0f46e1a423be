"""Crash closers: synthetic events that close a log ending inside a turn.

`session-log-format` §6.4 (upstream `interruptedTurnClosers`). A read-only load adds
them in memory only; opening a log for append commits them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

__all__ = [
    "TOOL_NOT_STARTED",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "interrupted_turn_closers",
]

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
"""Recovery code for an assistant tool request that never reached a recorded call start."""
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
"""Recovery code for a recorded tool call whose outcome was not durably recorded."""
TOOL_NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
TOOL_OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably "
    "recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: "
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user. Do not retry blindly."
)


def _call_key(value: object) -> Hashable:
    # JSON scalars compare by value, as Map keys do in JavaScript; an object or array id
    # (malformed, but not rejected by validation) only ever matches itself.
    if value is None or isinstance(value, (str, int, float)):
        return value
    return ("object", id(value))


def _data(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def interrupted_turn_closers(
    events: Iterable[Mapping[str, Any]], *, last: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Return the synthetic events that close an open final turn, in order.

    Scans the log: `turn/start` opens a turn, `turn/end` closes it; `step/start` opens a
    step; assistant `tool-call` blocks register pending calls (reset at every `step/end`
    and turn boundary), `tool/call` records the call's seq, `tool/result` settles it.
    If a turn is still open, the closers are: one error `tool/result` per pending call
    (in call order), `step/end` if a step is open, then `turn/end` with reason
    ``{"kind": "interrupted"}``. Seqs continue the log; every closer reuses the last
    event's `time`.

    Args:
        events: the loaded log, in seq order (chunk-row members may be omitted: they
            never move the cursor).
        last: the log's last event, when `events` omits trailing chunk members.

    Returns:
        The closers; empty when the log is balanced or empty.
    """
    open_turn: Any = None
    open_step: Any = None
    # call key -> {"id": call id, "step": step, "callSeq"?: seq}; insertion-ordered like
    # upstream's Map, which keeps a re-registered id at its first position.
    pending: dict[Hashable, dict[str, Any]] = {}
    final: Mapping[str, Any] | None = None
    for event in events:
        final = event
        kind = event.get("type")
        if kind == "turn/start":
            open_turn, open_step = _data(event).get("turn"), None
            pending.clear()
        elif kind == "turn/end":
            open_turn, open_step = None, None
            pending.clear()
        elif kind == "step/start":
            open_step = _data(event).get("step")
        elif kind == "step/end":
            pending.clear()
            open_step = None
        elif kind == "assistant/message":
            data = _data(event)
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool-call":
                    call_id = block.get("id")
                    pending[_call_key(call_id)] = {"id": call_id, "step": data.get("step")}
        elif kind == "tool/call":
            entry = pending.get(_call_key(_data(event).get("callId")))
            if entry is not None:
                entry["callSeq"] = event.get("seq")
        elif kind == "tool/result":
            message = _data(event).get("message")
            source = message.get("source") if isinstance(message, dict) else None
            call_id = source.get("callId") if isinstance(source, dict) else None
            pending.pop(_call_key(call_id), None)
    if last is not None:
        final = last
    if open_turn is None or final is None:
        return []
    seq = int(final["seq"]) + 1
    # Closers are built before restore validation, which then rejects a stored event
    # without a valid `time`; reading it with [] would escape as a KeyError instead.
    time = final.get("time")
    closers: list[dict[str, Any]] = []
    for entry in pending.values():
        call_id = entry["id"]
        started = "callSeq" in entry
        message = {
            "id": f"interrupted-tool-result-{call_id}-{seq}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "isError": True,
                    "content": [
                        {
                            "type": "text",
                            "text": TOOL_OUTCOME_UNKNOWN_TEXT if started else TOOL_NOT_STARTED_TEXT,
                        }
                    ],
                }
            ],
        }
        error = (
            {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
            if started
            else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
        )
        closer: dict[str, Any] = {
            "type": "tool/result",
            "seq": seq,
            "time": time,
            "data": {"turn": open_turn, "step": entry["step"], "message": message, "error": error},
            "surfaceOp": "append",
        }
        if started:
            closer["sourceEventSeqs"] = [entry["callSeq"]]
        closers.append(closer)
        seq += 1
    if open_step is not None:
        closers.append(
            {
                "type": "step/end",
                "seq": seq,
                "time": time,
                "data": {"turn": open_turn, "step": open_step},
            }
        )
        seq += 1
    closers.append(
        {
            "type": "turn/end",
            "seq": seq,
            "time": time,
            "data": {"turn": open_turn, "reason": {"kind": "interrupted"}},
        }
    )
    return closers
