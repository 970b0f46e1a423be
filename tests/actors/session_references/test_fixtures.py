"""Session references over the real DSH fixture logs.

A deliberately minimal JSONL reader lives here (packed rows, legacy assistant shape,
crash closers, surface fold); the real reader is ``actors._log_*``. Its output is checked
against the upstream load + projection results listed in session-log-format.md §13
(``capturedThroughSeq`` and projected message counts), then every loadable fixture is
referenced from an agent in ``/projects/demo`` at budgets 65536, 4096, 1024 and 400.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.session_references._config import SessionReferenceConfig
from actors.session_references._jstext import utf8_len
from actors.session_references._prepare import prepare
from actors.session_references._projection import SourceSnapshot, project_conversation
from actors.session_references._prompt import PROMPT_PREFIX, PROMPT_SUFFIX
from actors.session_references._retention import omission_notice
from actors.session_references._spill import SaveTextSpill, SpillRef

SHARED = Path(__file__).resolve().parents[3].parent / "shared"
FIXTURES = SHARED / "fixtures" / "dsh-sessions"
SPEC = SHARED / "spec" / "session-log-format.md"
PACKED = {"text-chunks", "reasoning-chunks", "tool-call-chunks"}
BUDGETS = (65536, 4096, 1024, 400)


@functools.cache
def upstream_results() -> dict[str, tuple[int | None, int] | None]:
    """Fixture file name -> (through, msgs) from the spec table; ``None`` = rejected."""
    if not SPEC.is_file():
        pytest.skip(f"spec not found at {SPEC}")
    results: dict[str, tuple[int | None, int] | None] = {}
    prefix = ""
    for line in SPEC.read_text("utf-8").splitlines():
        heading = re.match(r"^\*\*[\w-]+\*\* — under `deepseek-harness:([^`]*)`", line)
        if heading:
            prefix = heading.group(1)
            continue
        row = re.match(
            r"^\| `([^`]+)` \|.*\| (ok: through=(\w+), msgs=(\d+)(?:, compacted)?|REJECT[^|]*) \|$",
            line,
        )
        if row and prefix:
            name = (prefix + row.group(1)).replace("/", "__")
            if row.group(3) is None:
                results[name] = None
            else:
                through = None if row.group(3) == "None" else int(row.group(3))
                results[name] = (through, int(row.group(4)))
    return results


def fixture_names() -> list[str]:
    """All fixture file names (empty when the folder is absent)."""
    return sorted(p.name for p in FIXTURES.glob("*.jsonl")) if FIXTURES.is_dir() else []


def _closers(events: list[dict[str, Any]]) -> int:
    """How many synthetic events upstream appends for an open final turn (§6.4)."""
    starts = [i for i, e in enumerate(events) if e["type"] == "turn/start"]
    if not starts or any(e["type"] == "turn/end" for e in events[starts[-1] :]):
        return 0
    pending: dict[str, None] = {}
    step_open = False
    for event in events[starts[-1] :]:
        kind, data = event["type"], event.get("data") or {}
        if kind == "step/start":
            step_open = True
        elif kind == "step/end":
            step_open = False
            pending.clear()
        elif kind == "assistant/message":
            for block in (data.get("message") or {}).get("content", []):
                if block.get("type") == "tool-call":
                    pending[block["id"]] = None
        elif kind == "tool/result":
            message = data.get("message") or {}
            call_id = data.get("callId") or (message.get("source") or {}).get("callId")
            pending.pop(str(call_id), None)
    return len(pending) + int(step_open) + 1


@functools.cache
def read_fixture(name: str) -> SourceSnapshot:
    """Load one fixture log into a surface snapshot (minimal reader)."""
    lines = (FIXTURES / name).read_text("utf-8").splitlines()
    header = json.loads(lines[0])
    events: list[dict[str, Any]] = []
    for line in lines[1:]:
        record = json.loads(line)
        if record["type"] in PACKED:
            members = record["data"].get("texts") or record["data"].get("args")
            events.extend({"type": "assistant/chunk", "data": {}} for _ in members)
            continue
        data = record.get("data")
        if record["type"] == "assistant/message" and "message" not in data:
            # Legacy import: pre-identity assistant messages carry `content` at the top.
            record = {**record, "data": {**data, "message": {"content": data.get("content", [])}}}
        events.append(record)
    count = len(events) + _closers(events)
    surface: list[int] = []
    for seq, event in enumerate(events):
        op = event.get("surfaceOp")
        if op == "append":
            surface.append(seq)
        elif isinstance(op, dict):
            # Older logs spell the range start/end, newer ones startSeq/endSeq.
            first = surface.index(op["start"] if "start" in op else op["startSeq"])
            last = surface.index(op["end"] if "end" in op else op["endSeq"])
            surface[first : last + 1] = [seq]
    return SourceSnapshot(
        header=header,
        captured_through_seq=count - 1 if count else None,
        events=[events[seq] for seq in surface],
    )


@pytest.fixture(scope="module")
def loadable() -> list[str]:
    """Fixtures upstream loads, with their upstream results."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    results = upstream_results()
    return [name for name in fixture_names() if results.get(name) is not None]


def test_spec_table_covers_every_fixture() -> None:
    """Each of the 169 fixtures has an upstream result row (159 loadable, 10 rejected)."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    results = upstream_results()
    names = fixture_names()
    assert len(names) == 169
    assert set(names) <= set(results)
    assert sum(results[name] is None for name in names) == 10


def test_projection_matches_upstream_counts(loadable: list[str]) -> None:
    """capturedThroughSeq and projected message counts equal upstream's for every fixture."""
    results = upstream_results()
    mismatches = []
    for name in loadable:
        snapshot = read_fixture(name)
        got = (snapshot.captured_through_seq, len(project_conversation(snapshot.events)))
        if got != results[name]:
            mismatches.append((name, got, results[name]))
    assert mismatches == []


@attrs.frozen
class Agent:
    """An agent in /projects/demo."""

    session_id: str = "agent-demo"
    cwd: str | None = "/projects/demo"


class RecordingStore:
    """A spill store keeping transcripts in memory."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    async def save(self, request: SaveTextSpill) -> SpillRef:
        locator = f"/spill/{request.source_session_id}/{request.suggested_name}"
        self.saved[locator] = request.content
        return SpillRef(locator=locator, bytes=utf8_len(request.content), retrieval_hint="hint")

    async def discard(self, ref: SpillRef) -> None:
        self.saved.pop(ref.locator, None)


def _fragments(transcript: str) -> list[str]:
    """Decode a transcript back to its message texts."""
    texts = []
    for block in transcript.split("\n### Message ")[1:]:
        lines = block.split("\n")[2:]
        texts.append("".join(json.loads(line) for line in lines if line.startswith('"')))
    return texts


@pytest.mark.parametrize("budget", BUDGETS)
async def test_every_fixture_prepares_within_budget(loadable: list[str], budget: int) -> None:
    """Each loadable fixture prepares: previews fit, texts are heads/tails, spills are complete."""
    config = SessionReferenceConfig.create(max_reference_bytes=budget)
    truncated = 0
    for name in loadable:
        snapshot = read_fixture(name)

        async def read(session_id: str, snapshot: SourceSnapshot = snapshot) -> SourceSnapshot:
            return snapshot

        store = RecordingStore()
        session_id = snapshot.session_id
        # No fixture exceeds even the 400-byte budget: its fixed fields are short.
        prepared = await prepare(
            Agent(),
            [{"type": "text", "text": f"see @{session_id}"}],
            [{"sessionId": session_id}],
            read_snapshot=read,
            config=config,
            spill_store=store,
        )
        assert prepared.additional_context is not None
        text = prepared.additional_context.text
        assert text.startswith(PROMPT_PREFIX)
        preview_json = text[len(PROMPT_PREFIX) :].split(PROMPT_SUFFIX, 1)[0]
        assert "<" not in preview_json
        (preview,) = json.loads(preview_json)
        assert utf8_len(preview_json) - 2 <= budget, name
        assert preview["sessionId"] == session_id
        assert preview["cwd"] == snapshot.cwd
        originals = [item.text for item in project_conversation(snapshot.events)]
        (record,) = prepared.additional_context.source.to_wire()["references"]
        assert record["originalMessages"] == len(originals)
        assert record["capturedFormatVersion"] == snapshot.header.get("version")
        for item in preview["conversation"]:
            assert item["text"] in originals or item["text"] == "" or "… omitted " in item["text"]
        if record["truncated"]:
            truncated += 1
            assert text.count("## Reference omissions") == 1
            (transcript,) = store.saved.values()
            assert _fragments(transcript) == originals
            cut = [i["text"] for i in preview["conversation"] if i["text"] not in originals]
            for piece in cut:
                if piece:
                    omitted = int(re.search(r"omitted (\d+) UTF-8", piece).group(1))  # type: ignore[union-attr]
                    assert piece.endswith(omission_notice(omitted))
        else:
            assert "## Reference omissions" not in text
            assert preview["conversation"] == [
                {"role": i.role, "text": i.text} for i in project_conversation(snapshot.events)
            ]
            assert store.saved == {}
    # The fixtures' conversations are short: only the small budgets cut anything.
    assert (truncated > 0) == (budget <= 1024)


def test_compaction_fixtures_project_their_checkpoint(loadable: list[str]) -> None:
    """The two logs with a surface replace project the checkpoint, not the shadowed turns."""
    compacted = [
        name
        for name in loadable
        if any(item.checkpoint for item in project_conversation(read_fixture(name).events))
    ]
    assert compacted == [
        "examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl",
        "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl",
    ]
