"""Session titles and subagent creation labels, folded from the log.

`session-log-format` §7 and §8. Titles are `session/title` events (never header
fields); the current title is the last one in the raw log. A subagent child's creation
label is the `label` of its first `subagent/descriptor` event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from actors.session_log._json import safe_int
from actors.session_log._sequence import EventSequence

__all__ = [
    "FALLBACK_TITLE_MAX_BYTES",
    "FALLBACK_TITLE_MAX_WORDS",
    "SUBAGENT_DESCRIPTOR_VERSION",
    "TITLE_MAX_BYTES",
    "SessionTitle",
    "SubagentDescriptor",
    "SubagentDescriptorError",
    "fallback_title",
    "fold_subagent_descriptor",
    "normalize_title",
    "session_title",
    "subagent_label",
]

FALLBACK_TITLE_MAX_WORDS = 5
"""Shipped fallback-title word cap (§7)."""
FALLBACK_TITLE_MAX_BYTES = 40
"""Shipped fallback-title UTF-8 byte cap (§7)."""
TITLE_MAX_BYTES = 80
"""Byte cap for any title (§7: "any title ≤ 80 bytes")."""
SUBAGENT_DESCRIPTOR_VERSION = 2
"""The only descriptor version this build classifies (§8)."""


def _singles(events: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    # Titles and descriptors are never packed-row members.
    return events.singles() if isinstance(events, EventSequence) else events


@attrs.frozen(kw_only=True)
class SessionTitle:
    """The current title, as upstream's `readTitle` reports it."""

    title: str
    """The title text."""
    message_seqs: tuple[int, ...]
    """Seqs of the messages the title was derived from (empty for a user rename)."""
    source: Mapping[str, Any]
    """``{"kind": "fallback"}``, ``{"kind": "provider", …}`` or ``{"kind": "user"}``."""
    event_seq: int
    """Seq of the `session/title` event."""
    updated_at: int
    """That event's `time`."""


def session_title(events: Iterable[Mapping[str, Any]]) -> SessionTitle | None:
    """Return the session's current title: the last `session/title` event (§7).

    Position is irrelevant and compaction does not affect it. Returns None when the log
    has no title event, or when the last one does not carry a string title.
    """
    last: Mapping[str, Any] | None = None
    for event in _singles(events):
        if event.get("type") == "session/title":
            last = event
    if last is None:
        return None
    data = last.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("title"), str):
        return None
    seqs = data.get("messageSeqs")
    source = data.get("source")
    return SessionTitle(
        title=data["title"],
        message_seqs=tuple(s for s in seqs if safe_int(s) is not None)
        if isinstance(seqs, list)
        else (),
        source=source if isinstance(source, dict) else {},
        event_seq=int(last["seq"]),
        updated_at=int(last["time"]),
    )


# Upstream session-title/normalize.ts, translated regex for regex.
_OSC = re.compile("(?:\x1b\\]|\x9d)(?:(?!\x07|\x1b\\\\)[\\s\\S])*(?:\x07|\x1b\\\\|\\Z)")
_CSI = re.compile("(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]")
_ESC = re.compile("\x1b[@-_]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_DIRECTIONAL = re.compile("[\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
# JavaScript's `\s`, which differs slightly from Python's.
_JS_WHITESPACE = re.compile(
    "[\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
)


def _clean(text: str) -> str:
    for pattern in (_OSC, _CSI, _ESC, _CONTROL, _DIRECTIONAL):
        text = pattern.sub("", text)
    return _JS_WHITESPACE.sub(" ", text).strip(" ")


def _utf8_length(char: str) -> int:
    # Node's Buffer.byteLength counts a lone surrogate as U+FFFD (3 bytes).
    point = ord(char)
    if point < 0x80:
        return 1
    if point < 0x800:
        return 2
    return 3 if point < 0x10000 else 4


def _truncate_utf8(text: str, max_bytes: int) -> str:
    if max_bytes <= 0:
        raise ValueError("maxBytes must be a positive integer")
    used = 0
    for index, char in enumerate(text):
        used += _utf8_length(char)
        if used > max_bytes:
            # Cut before the first code point that does not fit, never inside one.
            return text[:index]
    return text


def normalize_title(text: str, max_bytes: int = TITLE_MAX_BYTES) -> str:
    """Normalise a title: one line, controls stripped, trimmed, byte-capped (§7).

    Returns:
        The normalised title; possibly empty after sanitisation.
    """
    return _truncate_utf8(_clean(text), max_bytes).rstrip(" ")


def fallback_title(
    text: str,
    max_words: int = FALLBACK_TITLE_MAX_WORDS,
    max_bytes: int = FALLBACK_TITLE_MAX_BYTES,
) -> str:
    """Derive the deterministic first-prompt fallback title (§7): first words, byte-capped."""
    if max_words <= 0:
        raise ValueError("maxWords must be a positive integer")
    words = [word for word in _clean(text).split(" ") if word][:max_words]
    return _truncate_utf8(" ".join(words), max_bytes).rstrip(" ")


class SubagentDescriptorError(ValueError):
    """A version-2 `subagent/descriptor` payload does not match its schema."""


@attrs.frozen(kw_only=True)
class SubagentDescriptor:
    """A child session's durable identity (§8)."""

    mode: Literal["one-shot", "continuable"]
    """Lifecycle mode."""
    provider: str
    """The provider that established the child."""
    label: str | None
    """The creation label (the initial delegation's short description), if any."""
    seq: int
    """Seq of the descriptor event."""
    data: Mapping[str, Any]
    """The complete payload."""


_BASE_KEYS = frozenset({"version", "mode", "provider", "label"})
_CONTINUABLE_KEYS = _BASE_KEYS | {"agentProvider", "agentModel", "persona", "toolFilter"}


def _parse_descriptor(data: object, seq: int) -> SubagentDescriptor | None:
    if not isinstance(data, dict):
        raise SubagentDescriptorError("persisted subagent descriptor payload must be an object")
    version = data.get("version")
    if type(version) not in (int, float):
        raise SubagentDescriptorError("persisted subagent descriptor version must be a number")
    if version != SUBAGENT_DESCRIPTOR_VERSION:
        return None  # "a non-2 version makes the child unclassifiable"
    mode = data.get("mode")
    if mode not in ("one-shot", "continuable"):
        raise SubagentDescriptorError(
            'persisted subagent descriptor mode must be "one-shot" or "continuable"'
        )
    allowed = _BASE_KEYS if mode == "one-shot" else _CONTINUABLE_KEYS
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise SubagentDescriptorError(
            f'persisted subagent descriptor payload has unknown field "{unknown[0]}"'
        )
    if not isinstance(data.get("provider"), str):
        raise SubagentDescriptorError("persisted subagent descriptor provider must be a string")
    label = data.get("label")
    if ("label" in data or mode == "continuable") and not isinstance(label, str):
        raise SubagentDescriptorError("persisted subagent descriptor label must be a string")
    for key in ("agentProvider", "agentModel", "persona"):
        if key in data and not isinstance(data[key], str):
            raise SubagentDescriptorError(f"persisted subagent descriptor {key} must be a string")
    return SubagentDescriptor(
        mode="one-shot" if mode == "one-shot" else "continuable",
        provider=data["provider"],
        label=label if isinstance(label, str) else None,
        seq=seq,
        data=data,
    )


def fold_subagent_descriptor(events: Iterable[Mapping[str, Any]]) -> SubagentDescriptor | None:
    """Return the child's descriptor: the first `subagent/descriptor` event (§8, first wins).

    Returns:
        The descriptor, or None when the log has none or its version is not 2.

    Raises:
        SubagentDescriptorError: a version-2 payload does not match its schema.
    """
    for event in _singles(events):
        if event.get("type") == "subagent/descriptor":
            return _parse_descriptor(event.get("data"), int(event["seq"]))
    return None


def subagent_label(events: Iterable[Mapping[str, Any]]) -> str | None:
    """Return the subagent creation label, or None (no descriptor, no label, or invalid)."""
    try:
        descriptor = fold_subagent_descriptor(events)
    except SubagentDescriptorError:
        return None
    return descriptor.label if descriptor is not None else None
