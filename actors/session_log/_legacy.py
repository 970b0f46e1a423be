"""Legacy import: older v0 event shapes upgraded in memory, obsolete ones refused.

`session-log-format` §6.2 and §6.3. The import is applied on every read and never
rewritten to disk. Current-looking malformed events are left untouched so restore
validation rejects them, instead of disguising corruption as legacy data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from actors.session_log._events import (
    KNOWN_SESSION_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    EventError,
    check_envelope,
    check_message_shape,
    check_request_header,
)
from actors.session_log._json import js_str, safe_int

__all__ = [
    "check_new_event",
    "check_supported_vocabulary",
    "import_legacy_event",
    "legacy_message_id",
]

_LEGACY_VOCABULARY = ("request/header-delta", "mode/set")
_TERMINAL_KINDS = frozenset({"completed", "blocked", "max-tokens", "interrupted"})


def legacy_message_id(session_id: str, seq: object) -> str:
    """Return the stable id minted for a message persisted before identities existed."""
    return f"legacy-message:{session_id}:{js_str(seq)}"


def _only_keys(
    record: Mapping[str, Any], required: Iterable[str], optional: Iterable[str] = ()
) -> bool:
    required = tuple(required)
    allowed = set(required).union(optional)
    return all(key in allowed for key in record) and all(key in record for key in required)


def check_supported_vocabulary(events: Iterable[Mapping[str, Any]], session_id: str) -> None:
    """Refuse the obsolete v0 vocabulary this build cannot replay (§6.2).

    Raises:
        EventError: a `request/header-delta` or `mode/set` event, or a `request/header`
            with reason ``"fallback"``, is present (reported in that priority, first seq).
    """
    first: dict[str, object] = {}
    for event in events:
        kind = event.get("type")
        if kind in _LEGACY_VOCABULARY:
            first.setdefault(str(kind), event.get("seq"))
        elif kind == "request/header":
            data = event.get("data")
            if isinstance(data, dict) and data.get("reason") == "fallback":
                first.setdefault("fallback", event.get("seq"))
    for kind in _LEGACY_VOCABULARY:
        if kind in first:
            raise EventError(
                f'session "{session_id}" contains unsupported legacy {kind} event '
                f"at seq {js_str(first[kind])}"
            )
    if "fallback" in first:
        raise EventError(
            f'session "{session_id}" contains unsupported legacy request/header reason '
            f'"fallback" at seq {js_str(first["fallback"])}'
        )


def _turn_is_valid(value: object) -> bool:
    turn = safe_int(value)
    return turn is not None and turn >= 1


def _migrate_turn_start(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict) or "trigger" not in data:
        return event
    trigger = data["trigger"]
    if (
        not _turn_is_valid(data.get("turn"))
        or not _only_keys(data, ("turn", "trigger"))
        or not isinstance(trigger, dict)
        or not isinstance(trigger.get("kind"), str)
        or trigger["kind"] == ""
    ):
        raise EventError(
            f'session "{session_id}" contains malformed pre-react-loop turn/start '
            f"at seq {js_str(event.get('seq'))}"
        )
    return {**event, "data": {"turn": data["turn"]}}


def _failure_is_current(failure: object) -> bool:
    if not isinstance(failure, dict):
        return False
    if not _only_keys(
        failure, ("message", "code"), ("status", "providerRetryAfterMs", "requestId")
    ):
        return False
    if not isinstance(failure["message"], str) or not isinstance(failure["code"], str):
        return False
    for key in ("status", "providerRetryAfterMs"):
        if key in failure and type(failure[key]) not in (int, float):
            return False
    return "requestId" not in failure or isinstance(failure["requestId"], str)


def _migrated_error_reason(reason: dict[str, Any]) -> dict[str, Any] | None:
    step = safe_int(reason.get("step"))
    if step is None or step < 0:
        return None
    failure = reason.get("failure")
    if _only_keys(reason, ("kind", "step", "failure")) and _failure_is_current(failure):
        return {"kind": "error", "error": failure}
    code = reason.get("code")
    keys = (
        ("kind", "step", "message") if "code" not in reason else ("kind", "step", "message", "code")
    )
    if not _only_keys(reason, keys) or not isinstance(reason.get("message"), str):
        return None
    if "code" in reason and not isinstance(code, str):
        return None
    # "old error shapes … → {kind:"error", error:{message, code}} (code defaults UNKNOWN)"
    return {
        "kind": "error",
        "error": {
            "message": reason["message"],
            "code": code if isinstance(code, str) else "UNKNOWN",
        },
    }


def _migrate_turn_end(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict):
        return event
    malformed = EventError(
        f'session "{session_id}" contains malformed pre-react-loop turn/end '
        f"at seq {js_str(event.get('seq'))}"
    )
    reason = data.get("reason")
    if (
        not _turn_is_valid(data.get("turn"))
        or not _only_keys(data, ("turn", "reason"))
        or not isinstance(reason, dict)
        or not isinstance(reason.get("kind"), str)
    ):
        raise malformed
    kind = reason["kind"]
    current: dict[str, Any] | None
    if kind in _TERMINAL_KINDS:
        if not _only_keys(reason, ("kind",)):
            raise malformed
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        if not _only_keys(reason, ("kind",)):
            raise malformed
        current = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if not _only_keys(reason, ("kind",)):
            raise malformed
        current = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        if "error" in reason:
            return event
        current = _migrated_error_reason(reason)
        if current is None:
            raise malformed
    else:
        return event
    return {**event, "data": {**data, "reason": current}}


def _migrate_steering(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    data = event.get("data")
    malformed = EventError(
        f'session "{session_id}" contains malformed pre-react-loop steering/message '
        f"at seq {js_str(event.get('seq'))}"
    )
    if not isinstance(data, dict):
        raise malformed
    wrapped = data.get("message")
    turn_ok = safe_int(data.get("turn")) is not None
    if isinstance(wrapped, dict) and turn_ok and _only_keys(data, ("turn", "message")):
        return {**event, "type": "user/message", "data": wrapped}
    if not turn_ok or not _only_keys(data, ("turn", "content", "source")):
        raise malformed
    message = {key: value for key, value in data.items() if key != "turn"}
    message["id"] = legacy_message_id(session_id, event.get("seq"))
    message["role"] = "user"
    return {**event, "type": "user/message", "data": message}


def _migrate_message(
    event: dict[str, Any], session_id: str, message_ids: Mapping[int, str]
) -> dict[str, Any]:
    data = event.get("data")
    if not isinstance(data, dict):
        return event
    kind = event.get("type")
    seq = event.get("seq")
    if kind == "user/message":
        if "id" in data or "role" in data or "message" in data:
            return event
        if "content" not in data or "source" not in data:
            return event
        return {**event, "data": {**data, "id": legacy_message_id(session_id, seq), "role": "user"}}
    if kind == "assistant/message":
        if "message" in data or "content" not in data or "provenance" not in data:
            return event
        rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
        provenance = data["provenance"]
        source = {**(provenance if isinstance(provenance, dict) else {}), "kind": "model"}
        rest["message"] = {
            "id": legacy_message_id(session_id, seq),
            "role": "assistant",
            "content": data["content"],
            "source": source,
        }
        return {**event, "data": rest}
    if kind == "tool/result":
        if "message" in data or not all(key in data for key in ("callId", "content", "isError")):
            return event
        rest = {
            key: value for key, value in data.items() if key not in ("callId", "content", "isError")
        }
        op = event.get("surfaceOp")
        inherited = op.get("start") if isinstance(op, dict) and op.get("op") == "replace" else None
        # "a replacement inherits the id of the event it replaces"
        if isinstance(inherited, (int, float)) and not isinstance(inherited, bool):
            number = safe_int(inherited)
            message_id: Any = message_ids.get(number) if number is not None else None
        else:
            message_id = legacy_message_id(session_id, seq)
        call_id = data["callId"]
        rest["message"] = {
            "id": message_id,
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": data["content"],
                    "isError": data["isError"],
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        }
        return {**event, "data": rest}
    return event


def import_legacy_event(
    event: dict[str, Any], session_id: str, message_ids: MutableMapping[int, str]
) -> dict[str, Any]:
    """Upgrade one stored event to the current shape (§6.3).

    Args:
        event: the stored event (not mutated).
        session_id: the log's session id (minted legacy ids embed it).
        message_ids: seq → message id of earlier message events; updated with this
            event's message id, for replacements that inherit an id.

    Returns:
        `event` itself when no import applies, else an upgraded copy.

    Raises:
        EventError: a legacy shape is malformed (e.g. "malformed pre-react-loop turn/end").
    """
    kind = event.get("type")
    if kind == "turn/start":
        event = _migrate_turn_start(event, session_id)
    elif kind == "turn/end":
        event = _migrate_turn_end(event, session_id)
    elif kind == "steering/message":
        event = _migrate_steering(event, session_id)
    if event.get("type") in ("user/message", "assistant/message", "tool/result"):
        event = _migrate_message(event, session_id, message_ids)
        data = event.get("data")
        holder = (
            data
            if event["type"] == "user/message"
            else (data.get("message") if isinstance(data, dict) else None)
        )
        seq = safe_int(event.get("seq"))
        if isinstance(holder, dict) and isinstance(holder.get("id"), str) and seq is not None:
            message_ids[seq] = holder["id"]
    return event


def check_new_event(event: dict[str, Any], session_id: str) -> None:
    """Check an event about to be written against every per-event read rule.

    A writer may only produce what readers accept as-is: a known type (or
    ``ignorable: true``), a valid envelope, current (not legacy) shapes, a valid message
    and request header. The surface rules need the log's state (`SurfaceFolder`).

    Raises:
        EventError: the event would be refused, imported as legacy, or fail validation.
    """
    kind = event.get("type")
    seq = safe_int(event.get("seq"))
    if not isinstance(kind, str):
        raise EventError("type must be a string")
    if kind not in KNOWN_SESSION_EVENT_TYPES and event.get("ignorable") is not True:
        raise EventError("unknown event type; readers refuse it unless it is ignorable")
    check_envelope(event, seq if seq is not None else -1)
    check_supported_vocabulary((event,), session_id)
    if import_legacy_event(event, session_id, {}) is not event:
        raise EventError("the payload uses a legacy shape; write the current one")
    if kind in SURFACE_EVENT_TYPES:
        check_message_shape(event, f"session event at seq {js_str(event['seq'])}")
    if kind == "request/header":
        check_request_header(event["data"], seq if seq is not None else -1)
