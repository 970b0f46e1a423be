"""The event envelope and the per-event restore rules.

`session-log-format` §5.1 (envelope), §5.3 (known vocabulary) and §6.5 (restore
validation of messages and request headers). The surface-op rules are in
`_surface`; legacy import is in `_legacy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.session_log._json import safe_int

__all__ = [
    "ENVELOPE_KEYS",
    "KNOWN_SESSION_EVENT_TYPES",
    "SURFACE_EVENT_TYPES",
    "EventError",
    "check_envelope",
    "check_message_shape",
    "check_request_header",
]

KNOWN_SESSION_EVENT_TYPES = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)
"""Upstream's generated `KNOWN_SESSION_EVENT_TYPES` (48 types, §5.3)."""

SURFACE_EVENT_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""The only types that may carry `surfaceOp`/`sourceEventSeqs`, and must carry `surfaceOp`."""

ENVELOPE_KEYS = frozenset(
    {"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}
)
"""§5.1: "Allowed top-level keys are exactly these seven; any other key rejects the log"."""

# adapterDefaults marks config fields the adapter filled in itself (every real log:
# {"reasoningEffort": true, "maxTokens": true} with both fields present in config).
_ADAPTER_DEFAULT_KEYS = frozenset({"reasoningEffort", "maxTokens"})


class EventError(ValueError):
    """An event breaks a restore rule; the message is upstream's `<detail>` text."""


def check_envelope(event: object, index: int) -> None:
    """Check the fixed envelope of one event (§5.1).

    Raises:
        EventError: unknown key, non-string type, bad seq or time, missing data, or an
            `ignorable` marker other than ``true``.
    """
    if not isinstance(event, dict):
        raise EventError(f"seed event at index {index} has an invalid event envelope")
    problem = None
    if not ENVELOPE_KEYS.issuperset(event):
        extra = sorted(set(event) - ENVELOPE_KEYS)
        problem = f"unknown key {extra[0]!r}"
    elif not isinstance(event.get("type"), str):
        problem = "type must be a string"
    elif (seq := safe_int(event.get("seq"))) is None or seq < 0:
        problem = "seq must be a non-negative safe integer"
    elif safe_int(event.get("time")) is None:
        # §5.1: time is a safe integer and "may be negative, no monotonicity requirement".
        problem = "time must be a safe integer"
    elif "data" not in event:
        problem = "data is missing"
    elif "ignorable" in event and event["ignorable"] is not True:
        problem = "ignorable must be true when present"
    if problem is not None:
        raise EventError(f"seed event at index {index} has an invalid event envelope ({problem})")


def _has_provider_model(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    provider, model = value.get("provider"), value.get("model")
    return isinstance(provider, str) and provider != "" and isinstance(model, str) and model != ""


def check_request_header(data: object, index: int) -> None:
    """Check a `request/header` payload (§6.5).

    Raises:
        EventError: config lacks a non-empty provider/model, `reasoningEffort` is present
            but not a non-empty string, or `adapterDefaults` is inconsistent.
    """
    header = data.get("header") if isinstance(data, dict) else None
    config = header.get("config") if isinstance(header, dict) else None
    if not isinstance(config, dict) or not _has_provider_model(config):
        raise EventError(f"seed request/header at index {index} lacks provider/model")
    assert isinstance(header, dict)
    if "reasoningEffort" in config:
        effort = config["reasoningEffort"]
        if not isinstance(effort, str) or effort == "":
            raise EventError(f"seed request/header at index {index} has an invalid reasoningEffort")
    if "adapterDefaults" in header:
        defaults = header["adapterDefaults"]
        # The spec asks for "consistent adapterDefaults" without spelling it out; we
        # require what every real log shows: an object of `true` flags naming config
        # fields the adapter defaulted, each present in config.
        if not isinstance(defaults, dict) or any(
            key not in _ADAPTER_DEFAULT_KEYS or flag is not True or key not in config
            for key, flag in defaults.items()
        ):
            raise EventError(
                f"seed request/header at index {index} has inconsistent adapterDefaults"
            )


def check_message_shape(event: Mapping[str, Any], subject: str) -> None:
    """Check the message carried by a message event (§6.5).

    Args:
        event: a `user/message`, `assistant/message` or `tool/result` event.
        subject: how to name the event in the error, e.g. ``session event at seq 4``.

    Raises:
        EventError: the message lacks an id, has the wrong role or source, non-array
            content, or (tool results) not exactly one matching `tool-result` block.
    """
    kind = event["type"]
    data = event.get("data")
    record = data if isinstance(data, dict) else None
    message = record if kind == "user/message" else (record or {}).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or not message["id"]:
        raise EventError(f"{subject} lacks an identified message")
    expected_role = "assistant" if kind == "assistant/message" else "user"
    if message.get("role") != expected_role:
        raise EventError(f'{subject} message must have role "{expected_role}"')
    source = message.get("source")
    if (
        not isinstance(source, dict)
        or not isinstance(source.get("kind"), str)
        or not source["kind"]
    ):
        raise EventError(f"{subject} message has invalid source")
    content = message.get("content")
    if not isinstance(content, list):
        raise EventError(f"{subject} message has invalid content")
    if kind == "assistant/message":
        if source["kind"] != "model" or not _has_provider_model(source):
            raise EventError(f"{subject} message must have model source")
        return
    if kind != "tool/result":
        return
    call_id = source.get("callId")
    if source["kind"] != "tool" or not isinstance(call_id, str) or not call_id:
        raise EventError(f"{subject} message must have tool source")
    block = content[0] if len(content) == 1 else None
    if (
        not isinstance(block, dict)
        or block.get("type") != "tool-result"
        or not isinstance(block.get("content"), list)
    ):
        raise EventError(f"{subject} message must contain one tool-result block")
    if block.get("toolCallId") != call_id:
        raise EventError(f"{subject} message has mismatched tool call ids")
