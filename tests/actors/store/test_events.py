"""Batch validation of appended events: all or nothing, against a copy of the fold."""

from __future__ import annotations

from typing import Any

import pytest

from actors.session_log._surface import SurfaceFolder
from actors.store._events import (
    AppendRejectedError,
    EventInput,
    check_batch,
    record_event,
    title_event,
)


def user(message_id: str, text: str = "hi") -> dict[str, Any]:
    """A current-shape user message."""
    return {
        "id": message_id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def test_a_copied_fold_evolves_independently() -> None:
    """Applying events to a copy leaves the original fold exactly as it was, and vice versa."""
    folder = SurfaceFolder()
    folder.apply(
        record_event(EventInput(type="user/message", data=user("a"), surface_op="append"), 0, 1)
    )
    clone = folder.copy()
    clone.apply(
        record_event(EventInput(type="user/message", data=user("b"), surface_op="append"), 1, 1)
    )
    assert (folder.nodes, folder.next_seq) == ((0,), 1)
    assert (clone.nodes, clone.next_seq) == ((0, 1), 2)
    folder.apply(record_event(EventInput(type="turn/start", data={"turn": 1}), 1, 1))
    assert (clone.nodes, clone.next_seq) == ((0, 1), 2)


def test_record_event_matches_the_writer_envelope() -> None:
    """The recorded event has upstream's key order and only the keys that were given."""
    event = record_event(
        EventInput(type="user/message", data=user("a"), surface_op="append", source_event_seqs=[]),
        5,
        42,
    )
    assert list(event) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    plain = record_event(EventInput(type="turn/start", data={"turn": 1}, ignorable=True), 0, 7)
    assert plain == {
        "type": "turn/start",
        "seq": 0,
        "time": 7,
        "data": {"turn": 1},
        "ignorable": True,
    }


def test_a_valid_batch_returns_the_advanced_fold_and_keeps_the_input() -> None:
    """A passing batch yields its recorded events and the fold after them; input untouched."""
    folder = SurfaceFolder()
    batch = [
        EventInput(type="turn/start", data={"turn": 1}),
        EventInput(type="user/message", data=user("u1"), surface_op="append"),
    ]
    fold, recorded = check_batch(batch, folder, "s", 9)
    assert [e["seq"] for e in recorded] == [0, 1]
    assert all(e["time"] == 9 for e in recorded)
    assert fold.nodes == (1,)
    assert folder.next_seq == 0


@pytest.mark.parametrize(
    ("bad", "detail"),
    [
        (EventInput(type="no/such-type", data={}), "unknown event type"),
        (EventInput(type="user/message", data=user("x")), "requires a surfaceOp"),
        (
            EventInput(type="turn/start", data={"turn": 2}, surface_op="append"),
            "cannot carry surfaceOp",
        ),
        (
            EventInput(
                type="user/message", data=user("x"), surface_op="append", source_event_seqs=[5]
            ),
            "must reference earlier events",
        ),
        (EventInput(type="turn/start", data={"x": float("nan")}), "JSON"),
    ],
)
def test_the_first_bad_event_rejects_the_whole_batch(bad: EventInput, detail: str) -> None:
    """The error names the offending event's index, its would-be seq and the rule it breaks."""
    folder = SurfaceFolder()
    good = EventInput(type="turn/start", data={"turn": 1})
    with pytest.raises(AppendRejectedError) as caught:
        check_batch([good, bad, good], folder, "s", 1)
    assert (caught.value.index, caught.value.seq) == (1, 1)
    assert detail in caught.value.detail
    assert "nothing of this batch was appended" in str(caught.value)
    assert folder.next_seq == 0


def test_title_event_normalizes_and_refuses_empty_titles() -> None:
    """A rename is normalized to one line and pinned as a user title; blank text is refused."""
    event = title_event("  Fix\nthe   build \x1b[31m ")
    assert event.data == {"title": "Fix the build", "messageSeqs": [], "source": {"kind": "user"}}
    with pytest.raises(ValueError, match="empty after normalization"):
        title_event(" \n\t ")
