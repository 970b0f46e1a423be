"""Retention of one projected source to its per-source byte budget (session-reference §4.5-4.7).

The budget bounds the UTF-8 size of the tag-safe compact JSON of one
``ReferencedSessionData`` object. Phase 1 drops the oldest non-checkpoint messages (never
the newest); phase 2 shortens the longest text from its original, head and tail kept,
with an exact ``[… omitted N UTF-8 bytes …]`` notice.

Sizes are kept incrementally (fixed head + per-item JSON + commas) instead of
re-serializing the whole object on every step as upstream does, and phase 1 grows the
kept suffix from the newest end; the results are identical (a test compares them with a
literal port of upstream's loop) and a huge source costs little more than its preview.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from actors.session_references._jstext import json_string, tag_safe_json, utf8_bytes, utf8_len
from actors.session_references._projection import (
    ProjectedItem,
    SourceSnapshot,
    project_conversation,
)

__all__ = [
    "ConversationItem",
    "ReferencedSessionData",
    "RetainedSource",
    "RetentionStats",
    "Truncation",
    "omission_notice",
    "retain_referenced_session",
    "truncate_with_notice",
]


def omission_notice(omitted_bytes: int) -> str:
    """The inline notice: ``\\n[… omitted N UTF-8 bytes …]`` (U+2026 twice); 31 + digits bytes."""
    return f"\n[\u2026 omitted {omitted_bytes} UTF-8 bytes \u2026]"


_NOTICE_FIXED_BYTES = 31


@attrs.frozen(kw_only=True)
class Truncation:
    """A shortened text and the exact number of UTF-8 bytes it omits."""

    text: str
    omitted_bytes: int


def _trim_trailing_partial(raw: bytes, end: int) -> int:
    """Length of ``raw[:end]`` without an incomplete trailing UTF-8 sequence."""
    i = end - 1
    # Walk back over at most three continuation bytes (0b10xxxxxx) to the lead byte.
    while i >= 0 and (raw[i] & 0xC0) == 0x80 and end - i <= 3:
        i -= 1
    if i < 0:
        return end
    lead = raw[i]
    expected = (
        1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4 if lead < 0xF8 else 0
    )
    if expected == 0:
        return end
    return i if end - i < expected else end


def _skip_leading_continuations(raw: bytes, start: int) -> int:
    """Start of ``raw[start:]`` after its leading continuation bytes."""
    while start < len(raw) and (raw[start] & 0xC0) == 0x80:
        start += 1
    return start


def truncate_with_notice(text: str, max_bytes: int) -> Truncation:
    """Keep a head and a tail of ``text`` plus the omission notice within ``max_bytes``.

    Binary search over the retained byte count ``r`` in ``[0, max_bytes]`` with head
    ``ceil(r/2)`` and tail ``floor(r/2)`` bytes, each cut repaired to a UTF-8 boundary;
    the largest candidate that fits wins. When even ``r = 0`` does not fit, the text
    becomes ``""`` with no notice and everything counts as omitted. Lone surrogates are
    encoded as U+FFFD first, as upstream's ``TextEncoder`` does.
    """
    raw = utf8_bytes(text)
    total = len(raw)
    if total <= max_bytes:
        return Truncation(text=text, omitted_bytes=0)
    low, high = 0, max_bytes
    best = Truncation(text="", omitted_bytes=total)
    while low <= high:
        retained = (low + high) // 2
        head = (retained + 1) // 2
        tail = retained // 2
        prefix_len = min(total, head)
        suffix_len = min(total - prefix_len, tail)
        prefix_end = _trim_trailing_partial(raw, prefix_len)
        suffix_start = _skip_leading_continuations(raw, total - suffix_len)
        kept = prefix_end + (total - suffix_start)
        omitted = total - kept
        if kept + _NOTICE_FIXED_BYTES + len(str(omitted)) <= max_bytes:
            kept_text = raw[:prefix_end].decode("utf-8", "replace") + raw[suffix_start:].decode(
                "utf-8", "replace"
            )
            best = Truncation(text=kept_text + omission_notice(omitted), omitted_bytes=omitted)
            low = retained + 1
        else:
            high = retained - 1
    return best


@attrs.frozen(kw_only=True)
class ConversationItem:
    """One serialized conversation entry: exactly ``{role, text}``."""

    role: Literal["user", "assistant"]
    text: str


@attrs.frozen(kw_only=True)
class ReferencedSessionData:
    """The per-source object serialized into the prompt (key order fixed)."""

    session_id: str
    label: str
    cwd: str | None
    captured_through_seq: int | None
    conversation: tuple[ConversationItem, ...]

    def to_json_obj(self) -> dict[str, Any]:
        """The JSON object: ``sessionId, label, cwd, capturedThroughSeq, conversation``."""
        return {
            "sessionId": self.session_id,
            "label": self.label,
            "cwd": self.cwd,
            "capturedThroughSeq": self.captured_through_seq,
            "conversation": [{"role": item.role, "text": item.text} for item in self.conversation],
        }


@attrs.frozen(kw_only=True)
class RetentionStats:
    """Per-source retention facts stored in the durable source record."""

    #: Any original projected item is a compaction checkpoint.
    compacted: bool
    #: Number of projected items.
    original_messages: int
    #: Number left after dropping.
    retained_messages: int
    #: Number dropped whole.
    omitted_messages: int
    #: Bytes of dropped originals plus bytes cut from retained texts.
    omitted_bytes: int
    #: ``omitted_messages > 0 or omitted_bytes > 0``.
    truncated: bool

    def to_wire(self) -> dict[str, Any]:
        """camelCase keys in upstream's order."""
        return {
            "compacted": self.compacted,
            "originalMessages": self.original_messages,
            "retainedMessages": self.retained_messages,
            "omittedMessages": self.omitted_messages,
            "omittedBytes": self.omitted_bytes,
            "truncated": self.truncated,
        }


@attrs.frozen(kw_only=True)
class RetainedSource:
    """One source fitted to its budget, with its complete projection kept beside it."""

    #: The retained preview.
    data: ReferencedSessionData
    #: The complete projection (all items, original texts); feeds the spilled transcript.
    full_data: ReferencedSessionData
    stats: RetentionStats
    #: ``snapshot.session.version`` verbatim (``None`` when the header lacks it).
    captured_format_version: object
    #: Tag-safe compact JSON of ``data``; its UTF-8 size is within the budget.
    data_json: str


@attrs.define
class _Slot:
    """Mutable working state of one retained item."""

    role: Literal["user", "assistant"]
    text: str
    original: str
    checkpoint: bool
    omitted_bytes: int
    json: str
    json_bytes: int
    text_bytes: int


def _item_json(role: str, text: str) -> str:
    return ('{"role":"' + role + '","text":' + json_string(text) + "}").replace("<", "\\u003c")


def _slot(item: ProjectedItem) -> _Slot:
    encoded = _item_json(item.role, item.text)
    return _Slot(
        role=item.role,
        text=item.text,
        original=item.text,
        checkpoint=item.checkpoint,
        omitted_bytes=0,
        json=encoded,
        json_bytes=utf8_len(encoded),
        text_bytes=utf8_len(item.text),
    )


def _data(
    head: dict[str, Any], items: Sequence[_Slot] | Sequence[ProjectedItem]
) -> ReferencedSessionData:
    return ReferencedSessionData(
        session_id=head["sessionId"],
        label=head["label"],
        cwd=head["cwd"],
        captured_through_seq=head["capturedThroughSeq"],
        conversation=tuple(ConversationItem(role=item.role, text=item.text) for item in items),
    )


def _drop_oldest(
    items: Sequence[ProjectedItem], fixed: int, max_bytes: int
) -> tuple[list[_Slot], int, int]:
    """Phase 1: drop the oldest non-checkpoint items (never the newest) until it fits.

    Dropping oldest-first until the object fits keeps the longest fitting suffix of the
    droppable items, so the suffix is grown from the newest end instead: only the kept
    items (and one more) are JSON-encoded, which keeps a huge source cheap when only a
    small preview survives.

    Returns:
        The retained slots in order, the UTF-8 bytes of the dropped originals, and the
        size of the retained object.
    """
    if not items:
        return [], 0, fixed
    newest = len(items) - 1
    slots: dict[int, _Slot] = {newest: _slot(items[newest])}
    droppable = []
    for index in range(newest):
        if items[index].checkpoint:
            slots[index] = _slot(items[index])
        else:
            droppable.append(index)
    base = fixed + sum(slot.json_bytes for slot in slots.values())
    count = len(slots)

    def size(kept_bytes: int, kept_count: int) -> int:
        return base + kept_bytes + (count + kept_count - 1)

    kept_bytes = kept_count = 0
    if size(0, 0) <= max_bytes:
        for index in reversed(droppable):
            slot = _slot(items[index])
            if size(kept_bytes + slot.json_bytes, kept_count + 1) > max_bytes:
                break
            slots[index] = slot
            kept_bytes += slot.json_bytes
            kept_count += 1
    dropped = droppable[: len(droppable) - kept_count]
    dropped_bytes = sum(utf8_len(items[index].text) for index in dropped)
    retained = [slots[index] for index in sorted(slots)]
    return retained, dropped_bytes, size(kept_bytes, kept_count)


def retain_referenced_session(
    snapshot: SourceSnapshot, label: str, max_bytes: int
) -> RetainedSource | None:
    """Project ``snapshot`` and fit it to ``max_bytes``.

    Args:
        snapshot: The source's surface observation.
        label: The normalized reference label (serialized as ``label``).
        max_bytes: Per-source cap on the UTF-8 size of the tag-safe JSON object.

    Returns:
        The preview, the full projection and stats; ``None`` when the source cannot fit
        (upstream then raises BUDGET_EXCEEDED).
    """
    original = project_conversation(snapshot.events)
    head = {
        "sessionId": snapshot.session_id,
        "label": label,
        "cwd": snapshot.cwd,
        "capturedThroughSeq": snapshot.through_seq,
    }
    # `{"sessionId":…,"capturedThroughSeq":N` + `,"conversation":[` … `]}`
    opening = tag_safe_json(head)[:-1] + ',"conversation":['
    fixed = utf8_len(opening) + len("]}")
    retained, dropped_bytes, total = _drop_oldest(original, fixed, max_bytes)
    omitted_messages = len(original) - len(retained)

    while total > max_bytes:
        # Phase 2: shorten the longest current text (first on ties) from its original.
        longest: _Slot | None = None
        for slot in retained:
            if slot.text_bytes > (longest.text_bytes if longest is not None else 0):
                longest = slot
        if longest is None:
            return None
        target = max(0, longest.text_bytes - (total - max_bytes))
        shortened = truncate_with_notice(longest.original, target)
        if shortened.text == longest.text:
            return None
        encoded = _item_json(longest.role, shortened.text)
        encoded_bytes = utf8_len(encoded)
        total += encoded_bytes - longest.json_bytes
        longest.text = shortened.text
        longest.omitted_bytes = shortened.omitted_bytes
        longest.json = encoded
        longest.json_bytes = encoded_bytes
        longest.text_bytes = utf8_len(shortened.text)

    omitted_bytes = dropped_bytes + sum(slot.omitted_bytes for slot in retained)
    stats = RetentionStats(
        compacted=any(item.checkpoint for item in original),
        original_messages=len(original),
        retained_messages=len(retained),
        omitted_messages=omitted_messages,
        omitted_bytes=omitted_bytes,
        truncated=omitted_messages > 0 or omitted_bytes > 0,
    )
    return RetainedSource(
        data=_data(head, retained),
        full_data=_data(head, original),
        stats=stats,
        captured_format_version=snapshot.format_version,
        data_json=opening + ",".join(slot.json for slot in retained) + "]}",
    )
