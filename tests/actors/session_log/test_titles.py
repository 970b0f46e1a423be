"""Titles and subagent creation labels folded from the log (`session-log-format.md` §7, §8)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.session_log._titles import (
    SubagentDescriptorError,
    fallback_title,
    fold_subagent_descriptor,
    normalize_title,
    session_title,
    subagent_label,
)


def ev(seq: int, kind: str, data: Any) -> dict[str, Any]:
    """Build an event envelope."""
    return {"type": kind, "seq": seq, "time": 100 + seq, "data": data}


def title(seq: int, text: str, **source: Any) -> dict[str, Any]:
    """A session/title event."""
    return ev(
        seq,
        "session/title",
        {"title": text, "messageSeqs": [0], "source": source or {"kind": "fallback"}},
    )


def test_latest_title_wins() -> None:
    """The current title is the last session/title event, wherever it sits."""
    events = [title(0, "First"), ev(1, "turn/start", {"turn": 1}), title(2, "Renamed", kind="user")]
    current = session_title(events)
    assert current is not None
    assert (current.title, current.event_seq, current.updated_at) == ("Renamed", 2, 102)
    assert current.source == {"kind": "user"}
    assert current.message_seqs == (0,)


def test_no_title() -> None:
    """A log without title events (or whose last one is malformed) has no title."""
    assert session_title([ev(0, "turn/start", {"turn": 1})]) is None
    assert session_title([title(0, "x"), ev(1, "session/title", {"title": None})]) is None


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("  Fix   the\tbuild\n now ", "Fix the build now"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("\x1b]0;window title\x07after", "after"),
        ("\x1b]8;;unterminated", ""),
        ("a\u202eb\u200bc\ufeffd", "abcd"),
        ("bell\x07 and \x7f del", "bell and del"),
        ("wide\u3000space\u00a0here", "wide space here"),
    ],
)
def test_normalize_title(raw: str, normalized: str) -> None:
    """Controls, escapes and bidi marks go; whitespace collapses to single spaces."""
    assert normalize_title(raw) == normalized


def test_normalize_title_caps_bytes_without_splitting_code_points() -> None:
    """The UTF-8 cap never splits a character and trims a trailing space."""
    assert normalize_title("é" * 50) == "é" * 40
    assert normalize_title("ab " + "é" * 50, max_bytes=6) == "ab é"
    assert normalize_title("abcd 😀", max_bytes=8) == "abcd"
    assert len(normalize_title("x" * 200).encode()) == 80


def test_fallback_title_takes_the_first_words() -> None:
    """The fallback is the first five words within 40 bytes (the shipped config)."""
    text = "Reply with exactly the word: PONG. Do not use any tools."
    assert fallback_title(text) == "Reply with exactly the word:"
    assert fallback_title("supercalifragilistic " * 3) == "supercalifragilistic supercalifragilisti"
    with pytest.raises(ValueError, match="maxWords"):
        fallback_title("x", max_words=0)


def descriptor(seq: int, **data: Any) -> dict[str, Any]:
    """A subagent/descriptor event."""
    return ev(seq, "subagent/descriptor", data)


def test_first_descriptor_wins() -> None:
    """The creation label comes from the first descriptor event."""
    events = [
        descriptor(
            0,
            version=2,
            mode="continuable",
            provider="spawn",
            label="Recall project codeword",
            agentModel="m",
        ),
        descriptor(5, version=2, mode="one-shot", provider="spawn", label="Later"),
    ]
    folded = fold_subagent_descriptor(events)
    assert folded is not None
    assert (folded.mode, folded.provider, folded.label, folded.seq) == (
        "continuable",
        "spawn",
        "Recall project codeword",
        0,
    )
    assert subagent_label(events) == "Recall project codeword"


def test_unlabelled_and_unclassifiable_descriptors() -> None:
    """One-shot children may omit the label; a non-2 version is unclassifiable."""
    assert subagent_label([descriptor(0, version=2, mode="one-shot", provider="spawn")]) is None
    assert fold_subagent_descriptor([descriptor(0, version=3, mode="x")]) is None
    assert fold_subagent_descriptor([]) is None


@pytest.mark.parametrize(
    "data",
    [
        {"version": "2"},
        {"version": 2, "mode": "forever", "provider": "p"},
        {"version": 2, "mode": "one-shot", "provider": "p", "persona": "x"},
        {"version": 2, "mode": "continuable", "provider": "p"},
        {"version": 2, "mode": "one-shot", "provider": 1},
    ],
)
def test_malformed_current_descriptors(data: dict[str, Any]) -> None:
    """A malformed version-2 payload raises, and has no label."""
    with pytest.raises(SubagentDescriptorError):
        fold_subagent_descriptor([descriptor(0, **data)])
    assert subagent_label([descriptor(0, **data)]) is None
