"""Projection of surface events and retention to the per-source byte budget."""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest

from actors.session_references._jstext import tag_safe_json, utf8_len
from actors.session_references._projection import (
    ProjectedItem,
    ProjectionError,
    SourceSnapshot,
    project_conversation,
)
from actors.session_references._retention import (
    RetentionStats,
    omission_notice,
    retain_referenced_session,
    truncate_with_notice,
)

USER = {"kind": "user"}
CHECKPOINT = {"kind": "plugin", "plugin": "compact", "compactionId": "c1"}


def user(text: str | None, *, source: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A ``user/message`` surface event with one text block (or custom content)."""
    content = extra.pop("content", [{"type": "text", "text": text}])
    return {
        "type": "user/message",
        "data": {"id": "m", "role": "user", "content": content, "source": source or USER},
        "surfaceOp": "append",
    }


def assistant(*blocks: dict[str, Any], **data: Any) -> dict[str, Any]:
    """An ``assistant/message`` surface event with the given content blocks."""
    message = {"id": "a", "role": "assistant", "content": list(blocks), "source": {"kind": "model"}}
    return {"type": "assistant/message", "data": {"turn": 1, "step": 1, "message": message, **data}}


def text(value: str) -> dict[str, str]:
    """A text content block."""
    return {"type": "text", "text": value}


def snapshot(
    events: list[dict[str, Any]],
    *,
    session_id: str = "s",
    cwd: str | None = None,
    through: int | None = 0,
    version: int = 0,
) -> SourceSnapshot:
    """A surface snapshot with a minimal header."""
    header: dict[str, Any] = {
        "type": "session",
        "version": version,
        "id": session_id,
        "createdAt": 0,
    }
    if cwd is not None:
        header["cwd"] = cwd
    return SourceSnapshot(header=header, captured_through_seq=through, events=events)


# -- projection ----------------------------------------------------------------------------


def test_projection_keeps_direct_users_checkpoints_and_assistant_text() -> None:
    """Only human prompts, compaction checkpoints and assistant text blocks are projected."""
    events = [
        user("<compacted-summary>checkpoint</compacted-summary>", source=CHECKPOINT),
        user("workspace context", source={"kind": "plugin", "plugin": "workspace"}),
        user("nested", source={"kind": "session-reference", "form": "recall"}),
        user("from tool", source={"kind": "tool", "callId": "c"}),
        user("goal", source={"kind": "goal"}),
        user("recent user"),
        {"type": "tool/result", "data": {"message": {"content": [text("tool output")]}}},
        {"type": "system/message", "data": {"message": {"content": [text("system")]}}},
        user("human steer", rpcId="x"),
        assistant(
            {"type": "reasoning", "text": "PRIVATE"},
            {"type": "tool-call", "id": "1", "name": "bash", "arguments": "{}"},
            text("visible answer"),
        ),
        assistant(text("partial"), interrupted=True),
    ]
    assert project_conversation(events) == [
        ProjectedItem(
            role="user", text="<compacted-summary>checkpoint</compacted-summary>", checkpoint=True
        ),
        ProjectedItem(role="user", text="recent user", checkpoint=False),
        ProjectedItem(role="user", text="human steer", checkpoint=False),
        ProjectedItem(role="assistant", text="visible answer", checkpoint=False),
        ProjectedItem(role="assistant", text="partial", checkpoint=False),
    ]


def test_projection_joins_text_blocks_and_skips_empty_texts() -> None:
    """Text blocks join with a newline; empty results are skipped but two empties are kept."""
    events = [
        user(None, content=[text("a"), {"type": "image", "attachment": {}}, text("b")]),
        user(None, content=[text("")]),
        user(None, content=[text(""), text("")]),
        user(None, content=[{"type": "text", "text": 5}, {"type": "text"}]),
        assistant(),
        assistant({"type": "reasoning", "text": "only reasoning"}),
    ]
    assert [item.text for item in project_conversation(events)] == ["a\nb", "\n"]


def test_checkpoint_recognition_ignores_compaction_id_and_surface_op() -> None:
    """Any plugin 'compact' source is a checkpoint, appended or replacing."""
    event = user("summary", source={"kind": "plugin", "plugin": "compact"})
    event["surfaceOp"] = {"op": "replace", "startSeq": 1, "endSeq": 3}
    assert project_conversation([event])[0].checkpoint is True


def test_projection_rejects_non_surface_events() -> None:
    """A non-surface event in a surface snapshot is an error naming its seq and type."""
    with pytest.raises(ProjectionError, match=r"event seq 7 of type 'assistant/chunk'"):
        project_conversation([{"type": "assistant/chunk", "seq": 7, "data": {}}])


def test_snapshot_from_surface_object() -> None:
    """A reader's surface observation with an attribute header adapts to a snapshot."""

    @attrs.frozen
    class Header:
        id: str = "src"
        version: int = 0
        created_at: int = 5
        cwd: str | None = "/w"

    @attrs.frozen
    class Surface:
        session: Header = Header()
        captured_through_seq: int | None = 3
        events: tuple[dict[str, Any], ...] = (user("x"),)

    snap = SourceSnapshot.from_surface(Surface())
    assert (snap.session_id, snap.cwd, snap.through_seq, snap.format_version) == ("src", "/w", 3, 0)
    assert snap.header["createdAt"] == 5
    no_cwd = SourceSnapshot.from_surface(Surface(session=Header(cwd=None)))
    assert "cwd" not in no_cwd.header
    assert no_cwd.cwd is None


def test_projection_merges_split_surrogate_pairs() -> None:
    """A pair held as two code points is projected as the character (JS string view)."""
    assert project_conversation([user("\ud83d\ude00")])[0].text == "😀"


# -- truncation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "max_bytes", "expected", "omitted"),
    [
        ("0123456789" * 10, 50, "01234567823456789\n[… omitted 83 UTF-8 bytes …]", 83),
        ("0123456789" * 10, 40, "0123789\n[… omitted 93 UTF-8 bytes …]", 93),
        ("界" * 10, 20, "", 30),
        ("界" * 30, 60, "界" * 9 + "\n[… omitted 63 UTF-8 bytes …]", 63),
        ("ab界cd" * 20, 45, "ab界c界cd\n[… omitted 129 UTF-8 bytes …]", 129),
    ],
)
def test_truncation_matches_upstream_table(
    source: str, max_bytes: int, expected: str, omitted: int
) -> None:
    """The spec's worked head/tail truncation examples hold byte for byte."""
    result = truncate_with_notice(source, max_bytes)
    assert (result.text, result.omitted_bytes) == (expected, omitted)
    assert utf8_len(result.text) <= max_bytes


def test_notice_bytes() -> None:
    """The notice is newline, [, U+2026, ' omitted N UTF-8 bytes ', U+2026, ]: 31 + digits."""
    assert omission_notice(83) == "\n[\u2026 omitted 83 UTF-8 bytes \u2026]"
    for count in (0, 7, 83, 1473, 10**6):
        assert utf8_len(omission_notice(count)) == 31 + len(str(count))


def test_truncation_returns_fitting_text_unchanged() -> None:
    """A text within the limit comes back whole with nothing omitted."""
    result = truncate_with_notice("short", 5)
    assert (result.text, result.omitted_bytes) == ("short", 0)


def test_truncation_encodes_lone_surrogates_as_replacement_character() -> None:
    """Kept bytes of a lone surrogate decode as U+FFFD, as TextEncoder produces."""
    result = truncate_with_notice("\ud800" + "x" * 100, 40)
    assert result.text.startswith("\ufffd")
    assert utf8_len(result.text) <= 40


def test_truncation_never_splits_a_character() -> None:
    """Cut points are repaired to UTF-8 boundaries and omitted counts stay exact."""
    source = "a😀é界" * 40
    total = utf8_len(source)
    for max_bytes in range(0, 120):
        result = truncate_with_notice(source, max_bytes)
        assert "\ufffd" not in result.text
        assert utf8_len(result.text) <= max_bytes
        if result.text:
            kept = result.text[: -len(omission_notice(result.omitted_bytes))]
            assert utf8_len(kept) + result.omitted_bytes == total


# -- retention -----------------------------------------------------------------------------


def _stats(**values: Any) -> RetentionStats:
    return RetentionStats(**values)


def test_hundred_byte_message_at_130_empties_the_text() -> None:
    """The spec's example: the notice cannot fit, so the text becomes "" with no notice."""
    retained = retain_referenced_session(snapshot([user("x" * 100)]), "s", 130)
    assert retained is not None
    assert retained.data_json == (
        '{"sessionId":"s","label":"s","cwd":null,"capturedThroughSeq":0,'
        '"conversation":[{"role":"user","text":""}]}'
    )
    assert retained.stats == _stats(
        compacted=False,
        original_messages=1,
        retained_messages=1,
        omitted_messages=0,
        omitted_bytes=100,
        truncated=True,
    )


def test_untruncated_source_keeps_everything() -> None:
    """Within budget nothing is dropped or cut and the preview equals the full data."""
    retained = retain_referenced_session(
        snapshot([user("a"), assistant(text("b"))], cwd="/source", through=13), "L", 65536
    )
    assert retained is not None
    assert retained.data == retained.full_data
    assert retained.stats.truncated is False
    assert retained.data_json == (
        '{"sessionId":"s","label":"L","cwd":"/source","capturedThroughSeq":13,'
        '"conversation":[{"role":"user","text":"a"},{"role":"assistant","text":"b"}]}'
    )


def test_phase_one_drops_oldest_non_checkpoints_and_never_the_newest() -> None:
    """Checkpoints stay, the oldest ordinary messages go first, the newest always stays."""
    events = [
        user("CHECKPOINT", source=CHECKPOINT),
        user("old-1 " + "a" * 40),
        assistant(text("old-2 " + "b" * 40)),
        user("mid " + "c" * 40),
        assistant(text("newest")),
    ]
    full = retain_referenced_session(snapshot(events), "s", 10**6)
    assert full is not None
    # One drop frees 72 bytes (`{"role":"user","text":"old-1 …"}` and a comma): two needed.
    budget = utf8_len(full.data_json) - 80
    retained = retain_referenced_session(snapshot(events), "s", budget)
    assert retained is not None
    assert [item.text for item in retained.data.conversation] == [
        "CHECKPOINT",
        "mid " + "c" * 40,
        "newest",
    ]
    assert retained.stats.omitted_messages == 2
    assert retained.stats.omitted_bytes == 46 + 46
    assert retained.stats.compacted is True
    assert len(retained.full_data.conversation) == 5


def test_phase_two_shortens_the_longest_first_on_ties() -> None:
    """When only protected items remain, the longest text (earliest on ties) is cut.

    The first cut lands one byte over (the notice's newline costs two JSON bytes), so a
    second round cuts the item that is now the longest: the other checkpoint.
    """
    events = [
        user("C" * 300, source=CHECKPOINT),
        user("D" * 300, source=CHECKPOINT),
        assistant(text("newest")),
    ]
    retained = retain_referenced_session(snapshot(events), "s", 700)
    assert retained is not None
    texts = [item.text for item in retained.data.conversation]
    assert texts[0].startswith("C")
    assert texts[0].endswith(" UTF-8 bytes …]")
    assert texts[1] == "D" * 265 + "\n[… omitted 35 UTF-8 bytes …]"
    assert texts[2] == "newest"
    assert retained.stats.omitted_messages == 0
    assert retained.stats.truncated is True
    assert utf8_len(retained.data_json) <= 700


def test_newest_huge_item_is_truncated_not_dropped() -> None:
    """A huge newest message survives phase 1 and is cut in phase 2."""
    retained = retain_referenced_session(snapshot([user("old"), user("N" * 5000)]), "s", 400)
    assert retained is not None
    conversation = retained.data.conversation
    assert len(conversation) == 1
    assert conversation[0].text.startswith("NNN")
    assert conversation[0].text.endswith(" UTF-8 bytes …]")
    assert retained.stats.omitted_messages == 1


def test_escapes_count_in_the_budget() -> None:
    """< costs six bytes and a newline two: the JSON bytes, not the raw text, are bounded."""
    source = "<\n" * 200
    for budget in (150, 200, 333, 600):
        retained = retain_referenced_session(snapshot([user(source)]), "s", budget)
        assert retained is not None
        assert utf8_len(retained.data_json) <= budget
        assert "<" not in retained.data_json


def test_source_that_cannot_fit_returns_none() -> None:
    """Fixed fields alone over budget, or no projected message to cut, cannot fit."""
    assert retain_referenced_session(snapshot([]), "s", 10) is None
    assert retain_referenced_session(snapshot([user("x")]), "s" * 200, 100) is None


def test_empty_source_within_budget() -> None:
    """A source with no projected messages serializes an empty conversation."""
    retained = retain_referenced_session(snapshot([], through=None), "s", 1000)
    assert retained is not None
    assert retained.data_json.endswith('"capturedThroughSeq":null,"conversation":[]}')
    assert retained.stats.original_messages == 0


def test_header_fields_come_from_the_snapshot() -> None:
    """sessionId is the header id, cwd null when absent, the label the normalized one."""
    retained = retain_referenced_session(
        snapshot([user("x")], session_id="hdr", through=5, version=3), "Label <1>", 1000
    )
    assert retained is not None
    assert retained.data.session_id == "hdr"
    assert retained.data.cwd is None
    assert retained.captured_format_version == 3
    assert '"label":"Label \\u003c1>"' in retained.data_json


def _reference_retain(items: list[ProjectedItem], head: dict[str, Any], max_bytes: int) -> Any:
    """A literal port of upstream's loop (re-serializing on every step), for comparison."""
    retained: list[dict[str, Any]] = [
        {"role": i.role, "text": i.text, "orig": i.text, "cp": i.checkpoint, "om": 0} for i in items
    ]
    omitted_messages = dropped = 0

    def size() -> int:
        conversation = [{"role": r["role"], "text": r["text"]} for r in retained]
        return utf8_len(tag_safe_json({**head, "conversation": conversation}))

    while size() > max_bytes:
        newest = len(retained) - 1
        index = next((i for i, r in enumerate(retained) if not r["cp"] and i != newest), -1)
        if index < 0:
            break
        removed = retained.pop(index)
        omitted_messages += 1
        dropped += utf8_len(removed["orig"])
    while size() > max_bytes:
        longest, longest_bytes = -1, 0
        for i, r in enumerate(retained):
            if utf8_len(r["text"]) > longest_bytes:
                longest, longest_bytes = i, utf8_len(r["text"])
        if longest < 0:
            return None
        target = max(0, longest_bytes - (size() - max_bytes))
        short = truncate_with_notice(retained[longest]["orig"], target)
        if short.text == retained[longest]["text"]:
            return None
        retained[longest]["text"], retained[longest]["om"] = short.text, short.omitted_bytes
    conversation = [{"role": r["role"], "text": r["text"]} for r in retained]
    omitted = dropped + sum(r["om"] for r in retained)
    return tag_safe_json({**head, "conversation": conversation}), (omitted_messages, omitted)


def test_incremental_sizes_equal_upstreams_full_reserialization() -> None:
    """Across random conversations and budgets the result equals a literal upstream port."""
    rng = random.Random(4)
    alphabet = ["a", "b", " ", "\n", "<", '"', "\\", "界", "😀", "é", "\x01", "\ud800"]
    for _case in range(120):
        events = []
        for _ in range(rng.randint(0, 6)):
            body = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))
            kind = rng.random()
            if kind < 0.2:
                events.append(user(body, source=CHECKPOINT))
            elif kind < 0.6:
                events.append(user(body))
            else:
                events.append(assistant(text(body)))
        snap = snapshot(events, cwd=rng.choice([None, "/w<"]), through=rng.choice([None, 9]))
        items = project_conversation(snap.events)
        head = {
            "sessionId": "s",
            "label": "s",
            "cwd": snap.cwd,
            "capturedThroughSeq": snap.through_seq,
        }
        for budget in (60, 90, 130, 200, 400, 800):
            expected = _reference_retain(items, head, budget)
            retained = retain_referenced_session(snap, "s", budget)
            if expected is None:
                assert retained is None
                continue
            assert retained is not None
            expected_json, (omitted_messages, omitted_bytes) = expected
            assert retained.data_json == expected_json
            assert retained.data_json == tag_safe_json(retained.data.to_json_obj())
            assert utf8_len(retained.data_json) <= budget
            assert retained.stats.omitted_messages == omitted_messages
            assert retained.stats.omitted_bytes == omitted_bytes
