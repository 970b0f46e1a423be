"""Packed rows, legacy import, crash closers, restore rules and the surface fold (spec §5, §6)."""

# ruff: noqa: E501  (parametrize tables quote upstream's messages verbatim, one case per entry)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._chunks import MalformedRowError, expand_row, pack_chunk_runs, validate_row
from actors.session_log._errors import LogValidationError
from actors.session_log._reader import LoadedSession, load_session
from actors.session_log._repair import (
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    interrupted_turn_closers,
)
from actors.session_log._surface import SurfaceError, fold_surface

HEADER = {"type": "session", "version": 0, "id": "s", "createdAt": 0, "delegationDepth": 0}
MODEL = {"kind": "model", "provider": "p", "model": "m"}


def ev(seq: int, kind: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    """Build an event envelope."""
    return {
        "type": kind,
        "seq": seq,
        "time": 500 + seq,
        "data": {} if data is None else data,
        **extra,
    }


def user(seq: int, text: str = "hi", **extra: Any) -> dict[str, Any]:
    """A current-shape user message event."""
    message = {"id": f"u{seq}", "role": "user", "content": [{"type": "text", "text": text}]}
    return ev(
        seq,
        "user/message",
        {**message, "source": {"kind": "user"}},
        **{"surfaceOp": "append", **extra},
    )


def assistant(seq: int, *blocks: dict[str, Any], step: int = 1, **extra: Any) -> dict[str, Any]:
    """A current-shape assistant message event."""
    message = {"id": f"a{seq}", "role": "assistant", "content": list(blocks), "source": MODEL}
    return ev(
        seq,
        "assistant/message",
        {"turn": 1, "step": step, "message": message},
        **{"surfaceOp": "append", **extra},
    )


def tool_result(
    seq: int, call_id: str, text: str = "ok", message_id: str = "t", **extra: Any
) -> dict[str, Any]:
    """A current-shape tool result event."""
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
    }
    message = {
        "id": message_id,
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [block],
    }
    return ev(
        seq,
        "tool/result",
        {"turn": 1, "step": 1, "message": message},
        **{"surfaceOp": "append", **extra},
    )


def load(tmp_path: Path, *records: Any) -> LoadedSession:
    """Write a raw log with HEADER and `records`, then load it."""
    path = tmp_path / "session.jsonl"
    lines = [json.dumps(r, separators=(",", ":")) for r in (HEADER, *records)]
    path.write_text("".join(text + "\n" for text in lines), encoding="utf-8")
    return load_session(path)


def rejected(tmp_path: Path, *records: Any) -> str:
    """Load a log expected to fail restore validation; return the detail."""
    with pytest.raises(LogValidationError) as caught:
        load(tmp_path, *records)
    return caught.value.detail


# --- packed chunk rows ---


def chunk(
    seq: int,
    text: str,
    index: int = 0,
    time: int | None = None,
    delta: str = "text-delta",
    **extra: Any,
) -> dict[str, Any]:
    """An assistant/chunk event (a text delta unless `delta` says otherwise)."""
    body: dict[str, Any] = {"type": delta, "index": index}
    if delta != "tool-call-delta":
        body["text"] = text
    body.update(extra)
    data = {"turn": 1, "step": 1, "chunk": body}
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 10 + seq if time is None else time,
        "data": data,
    }


def test_runs_of_three_pack_and_expand_exactly() -> None:
    """Three or more same-block deltas pack into one row that expands back exactly."""
    events = [chunk(0, "a"), chunk(1, "b", time=9), chunk(2, "c", time=20)]
    (row,) = pack_chunk_runs(events)
    assert row == {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 10,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [-1, 11], "texts": ["a", "b", "c"]},
    }
    assert validate_row(row) == 3
    assert expand_row(row) == events


def test_short_or_broken_runs_stay_verbatim() -> None:
    """Two-member runs, block changes, seq gaps and unknown keys are not packed."""
    two = [chunk(0, "a"), chunk(1, "b")]
    assert pack_chunk_runs(two) == two
    split = [chunk(0, "a"), chunk(1, "b"), chunk(2, "c", index=1)]
    assert pack_chunk_runs(split) == split
    gap = [chunk(0, "a"), chunk(1, "b"), chunk(3, "c")]
    assert pack_chunk_runs(gap) == gap
    extra = [chunk(0, "a"), {**chunk(1, "b"), "ignorable": True}, chunk(2, "c")]
    assert pack_chunk_runs(extra) == extra
    usage = [chunk(0, "a"), chunk(1, "b"), chunk(2, "", delta="usage", usage={}), chunk(3, "c")]
    assert pack_chunk_runs(usage) == usage


def test_tool_call_runs_need_one_id_and_uniform_name() -> None:
    """Tool-call deltas pack per call id, and only when `name` is uniformly present."""
    calls = [
        chunk(i, "", delta="tool-call-delta", id="c1", name="f", argumentsDelta=str(i))
        for i in range(3)
    ]
    (row,) = pack_chunk_runs(calls)
    assert row["type"] == "tool-call-chunks"
    assert row["data"] == {
        "turn": 1,
        "step": 1,
        "index": 0,
        "dt": [1, 1],
        "id": "c1",
        "name": "f",
        "args": ["0", "1", "2"],
    }
    assert expand_row(row) == calls
    mixed = [*calls[:2], chunk(2, "", delta="tool-call-delta", id="c1", argumentsDelta="2")]
    assert pack_chunk_runs(mixed) == mixed
    reasoning = [chunk(i, "r", delta="reasoning-delta") for i in range(4)]
    assert pack_chunk_runs(reasoning)[0]["type"] == "reasoning-chunks"


ROW = {
    "type": "text-chunks",
    "seq0": 0,
    "time0": 0,
    "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"extra": 1}, "envelope must be exactly"),
        ({"seq0": -1}, "seq0 must be a non-negative safe integer"),
        ({"time0": 0.5}, "time0 must be a safe integer"),
        ({"data": []}, "data must be an object"),
        (
            {"data": {**ROW["data"], "name": "x"}},
            "data must be exactly {turn, step, index, dt, texts}",
        ),
        ({"data": {**ROW["data"], "turn": "1"}}, "turn/step/index must be numbers"),
        ({"data": {**ROW["data"], "texts": []}}, "texts must be a non-empty string array"),
        ({"data": {**ROW["data"], "texts": ["a", 1]}}, "texts must be a non-empty string array"),
        ({"data": {**ROW["data"], "dt": [1.5]}}, "dt must be an array of safe integers"),
        ({"data": {**ROW["data"], "dt": []}}, "dt length 0 does not match 2 members"),
        ({"seq0": 2**53 - 1}, "member seqs must stay safe integers"),
        ({"time0": 2**53 - 1}, "member times must stay safe integers"),
    ],
)
def test_malformed_rows_are_errors(change: dict[str, Any], why: str) -> None:
    """Row validation is strict and names what is wrong."""
    with pytest.raises(
        MalformedRowError, match=f"^malformed text-chunks storage row: {_escape(why)}"
    ):
        validate_row({**ROW, **change})


def _escape(text: str) -> str:
    return text.replace("{", r"\{").replace("}", r"\}").replace("?", r"\?").replace("/", "/")


def test_tool_call_row_name_must_be_a_string() -> None:
    """A tool-call row's id and optional name must be strings."""
    row = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "id": "c", "name": 5, "dt": [], "args": ["x"]},
    }
    with pytest.raises(MalformedRowError, match="id \\(and name when present\\) must be strings"):
        validate_row(row)


# --- legacy import ---


def test_legacy_turn_trigger_and_reasons_are_imported(tmp_path: Path) -> None:
    """turn/start triggers are dropped and legacy turn/end reasons are upgraded."""
    loaded = load(
        tmp_path,
        ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message"}}),
        ev(1, "turn/end", {"turn": 1, "reason": {"kind": "aborted"}}),
        ev(2, "turn/start", {"turn": 2}),
        ev(3, "turn/end", {"turn": 2, "reason": {"kind": "disposed"}}),
        ev(4, "turn/start", {"turn": 3}),
        ev(5, "turn/end", {"turn": 3, "reason": {"kind": "error", "step": 1, "message": "boom"}}),
        ev(6, "turn/start", {"turn": 4}),
        ev(
            7,
            "turn/end",
            {
                "turn": 4,
                "reason": {
                    "kind": "error",
                    "step": 1,
                    "failure": {"message": "m", "code": "C", "status": 500},
                },
            },
        ),
        ev(8, "turn/start", {"turn": 5}),
        ev(
            9,
            "turn/end",
            {"turn": 5, "reason": {"kind": "error", "step": 0, "message": "x", "code": "E"}},
        ),
    )
    data = [event["data"] for event in loaded.events]
    assert data[0] == {"turn": 1}
    assert data[1]["reason"] == {"kind": "aborted", "reason": {"kind": "legacy"}}
    assert data[3]["reason"] == {"kind": "aborted", "reason": {"kind": "disposed"}}
    assert data[5]["reason"] == {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}}
    assert data[7]["reason"] == {
        "kind": "error",
        "error": {"message": "m", "code": "C", "status": 500},
    }
    assert data[9]["reason"] == {"kind": "error", "error": {"message": "x", "code": "E"}}


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (
            ev(0, "turn/start", {"turn": 0, "trigger": {"kind": "message"}}),
            "malformed pre-react-loop turn/start at seq 0",
        ),
        (
            ev(0, "turn/start", {"turn": 1, "trigger": {"kind": ""}}),
            "malformed pre-react-loop turn/start at seq 0",
        ),
        (
            ev(0, "turn/end", {"error": "model exploded"}),
            "malformed pre-react-loop turn/end at seq 0",
        ),
        (
            ev(0, "turn/end", {"turn": 1, "reason": {"kind": "completed", "x": 1}}),
            "malformed pre-react-loop turn/end at seq 0",
        ),
        (
            ev(0, "turn/end", {"turn": 1, "reason": {"kind": "error", "step": 1}}),
            "malformed pre-react-loop turn/end at seq 0",
        ),
        (
            ev(0, "steering/message", {"turn": 1, "content": []}),
            "malformed pre-react-loop steering/message at seq 0",
        ),
    ],
)
def test_malformed_legacy_shapes_reject(tmp_path: Path, event: dict[str, Any], detail: str) -> None:
    """A malformed legacy shape fails validation with upstream's message."""
    assert rejected(tmp_path, event) == f'session "s" contains {detail}'


def test_pre_identity_messages_are_imported(tmp_path: Path) -> None:
    """user, assistant and tool-result messages without identity gain the legacy shape."""
    loaded = load(
        tmp_path,
        ev(
            0,
            "user/message",
            {"content": [{"type": "text", "text": "q"}], "source": {"kind": "user"}},
            surfaceOp="append",
        ),
        ev(
            1,
            "assistant/message",
            {
                "turn": 1,
                "step": 1,
                "content": [{"type": "text", "text": "a"}],
                "provenance": {"provider": "p", "model": "m"},
            },
            surfaceOp="append",
        ),
        ev(
            2,
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "callId": "c",
                "content": [{"type": "text", "text": "r"}],
                "isError": False,
            },
            surfaceOp="append",
        ),
        ev(
            3,
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "callId": "c",
                "content": [{"type": "text", "text": "R"}],
                "isError": False,
            },
            surfaceOp={"op": "replace", "start": 2, "end": 2},
            sourceEventSeqs=[2],
        ),
    )
    events = loaded.events
    assert events[0]["data"] == {
        "content": [{"type": "text", "text": "q"}],
        "source": {"kind": "user"},
        "id": "legacy-message:s:0",
        "role": "user",
    }
    assert events[1]["data"] == {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "legacy-message:s:1",
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}],
            "source": MODEL,
        },
    }
    result = events[2]["data"]["message"]
    assert result["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "c",
            "content": [{"type": "text", "text": "r"}],
            "isError": False,
        }
    ]
    assert result["source"] == {"kind": "tool", "callId": "c"}
    assert result["id"] == "legacy-message:s:2"
    # "a replacement inherits the id of the event it replaces"
    assert events[3]["data"]["message"]["id"] == "legacy-message:s:2"
    assert loaded.surface == (0, 1, 3)


def test_steering_messages_become_user_messages(tmp_path: Path) -> None:
    """Removed steering/message events import as user/message (wrapped or bare)."""
    wrapped = {"id": "w", "role": "user", "content": [], "source": {"kind": "user"}}
    loaded = load(
        tmp_path,
        ev(0, "steering/message", {"turn": 1, "message": wrapped}, surfaceOp="append"),
        ev(
            1,
            "steering/message",
            {"turn": 1, "content": [], "source": {"kind": "user"}},
            surfaceOp="append",
        ),
    )
    assert [e["type"] for e in loaded.events] == ["user/message", "user/message"]
    assert loaded.events[0]["data"] == wrapped
    assert loaded.events[1]["data"] == {
        "content": [],
        "source": {"kind": "user"},
        "id": "legacy-message:s:1",
        "role": "user",
    }


# --- crash closers ---


def test_closers_for_pending_tool_calls(tmp_path: Path) -> None:
    """Pending calls get error results (started or not), then step/end and turn/end."""
    call = {"type": "tool-call", "id": "A", "name": "f", "arguments": "{}"}
    loaded = load(
        tmp_path,
        ev(0, "turn/start", {"turn": 1}),
        ev(1, "step/start", {"turn": 1, "step": 1}),
        assistant(2, call, {**call, "id": "B"}, {"type": "text", "text": "x"}),
        ev(3, "tool/call", {"turn": 1, "step": 1, "callId": "A", "name": "f", "arguments": "{}"}),
        ev(4, "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {}}}),
    )
    assert loaded.stored_count == 5
    started, not_started, step_end, turn_end = loaded.closers
    assert started == {
        "type": "tool/result",
        "seq": 5,
        "time": 504,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "interrupted-tool-result-A-5",
                "role": "user",
                "source": {"kind": "tool", "callId": "A"},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "A",
                        "isError": True,
                        "content": [{"type": "text", "text": TOOL_OUTCOME_UNKNOWN_TEXT}],
                    }
                ],
            },
            "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
        },
        "surfaceOp": "append",
        "sourceEventSeqs": [3],
    }
    assert (
        not_started["data"]["message"]["content"][0]["content"][0]["text"] == TOOL_NOT_STARTED_TEXT
    )
    assert not_started["data"]["error"]["code"] == "TOOL_NOT_STARTED"
    assert "sourceEventSeqs" not in not_started
    assert not_started["data"]["message"]["id"] == "interrupted-tool-result-B-6"
    assert step_end == {"type": "step/end", "seq": 7, "time": 504, "data": {"turn": 1, "step": 1}}
    assert turn_end == {
        "type": "turn/end",
        "seq": 8,
        "time": 504,
        "data": {"turn": 1, "reason": {"kind": "interrupted"}},
    }
    assert loaded.captured_through_seq == 8
    assert loaded.surface == (2, 5, 6)


def test_pending_calls_reset_at_step_end_and_results_settle_them() -> None:
    """Calls from a closed step, or with a result, get no synthetic result."""
    call = {"type": "tool-call", "id": "A", "name": "f", "arguments": "{}"}
    events = [
        ev(0, "turn/start", {"turn": 1}),
        ev(1, "step/start", {"turn": 1, "step": 1}),
        assistant(2, call, {**call, "id": "B"}),
        tool_result(3, "B"),
        ev(4, "step/end", {"turn": 1, "step": 1}),
        ev(5, "step/start", {"turn": 1, "step": 2}),
        assistant(6, {**call, "id": "C"}, step=2),
        tool_result(7, "C"),
    ]
    closers = interrupted_turn_closers(events)
    assert [(c["type"], c["data"]) for c in closers] == [
        ("step/end", {"turn": 1, "step": 2}),
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}),
    ]
    assert interrupted_turn_closers([*events, ev(8, "step/end"), ev(9, "turn/end")]) == []
    assert interrupted_turn_closers([]) == []


# --- restore validation ---


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (
            {**ev(0, "session/end-seed"), "extra": 1},
            "seed event at index 0 has an invalid event envelope (unknown key 'extra')",
        ),
        (
            {**ev(0, "session/end-seed"), "time": 1.5},
            "seed event at index 0 has an invalid event envelope (time must be a safe integer)",
        ),
        (
            {"type": "session/end-seed", "seq": 0, "time": 0},
            "seed event at index 0 has an invalid event envelope (data is missing)",
        ),
        (
            {**ev(0, "session/end-seed"), "ignorable": False},
            "seed event at index 0 has an invalid event envelope (ignorable must be true when present)",
        ),
        (
            ev(0, "request/header", {"header": {"config": {"model": "m"}}, "reason": "initial"}),
            "seed request/header at index 0 lacks provider/model",
        ),
        (
            ev(
                0,
                "request/header",
                {"header": {"config": {"provider": "p", "model": "m", "reasoningEffort": ""}}},
            ),
            "seed request/header at index 0 has an invalid reasoningEffort",
        ),
        (
            ev(
                0,
                "request/header",
                {
                    "header": {
                        "config": {"provider": "p", "model": "m"},
                        "adapterDefaults": {"maxTokens": True},
                    }
                },
            ),
            "seed request/header at index 0 has inconsistent adapterDefaults",
        ),
        (
            {**user(0), "data": {**user(0)["data"], "id": ""}},
            "session event at seq 0 lacks an identified message",
        ),
        (
            {**user(0), "data": {**user(0)["data"], "role": "assistant"}},
            'session event at seq 0 message must have role "user"',
        ),
        (
            {**user(0), "data": {**user(0)["data"], "source": {}}},
            "session event at seq 0 message has invalid source",
        ),
        (
            {**user(0), "data": {**user(0)["data"], "content": "x"}},
            "session event at seq 0 message has invalid content",
        ),
        (
            assistant(0)
            | {
                "data": {
                    "message": {
                        "id": "a",
                        "role": "assistant",
                        "content": [],
                        "source": {"kind": "model", "provider": "p"},
                    }
                }
            },
            "session event at seq 0 message must have model source",
        ),
        (
            tool_result(0, "c")
            | {"data": {"message": {**tool_result(0, "c")["data"]["message"], "content": []}}},
            "session event at seq 0 message must contain one tool-result block",
        ),
        (
            tool_result(0, "c")
            | {
                "data": {
                    "message": {
                        **tool_result(0, "c")["data"]["message"],
                        "source": {"kind": "tool", "callId": "d"},
                    }
                }
            },
            "session event at seq 0 message has mismatched tool call ids",
        ),
    ],
)
def test_restore_validation_failures(tmp_path: Path, event: dict[str, Any], detail: str) -> None:
    """Envelope, request-header and message-shape defects fail with upstream's detail."""
    assert rejected(tmp_path, event) == detail


def test_negative_time_and_valid_request_header_load(tmp_path: Path) -> None:
    """time may be negative; a consistent request header passes."""
    header = {
        "header": {
            "config": {"provider": "p", "model": "m", "reasoningEffort": "high", "maxTokens": 9},
            "adapterDefaults": {"reasoningEffort": True, "maxTokens": True},
        },
        "reason": "initial",
    }
    loaded = load(
        tmp_path, {**ev(0, "session/end-seed"), "time": -5}, ev(1, "request/header", header)
    )
    assert loaded.events[0]["time"] == -5


# --- surface fold ---


def test_replace_splices_the_surface() -> None:
    """A replacement removes the inclusive range and takes its place."""
    events = [
        user(0),
        assistant(1),
        user(2),
        user(3, surfaceOp={"op": "replace", "start": 0, "end": 1}, sourceEventSeqs=[0, 1]),
        assistant(4),
    ]
    fold = fold_surface(events)
    assert fold.nodes == (3, 2, 4)
    (replacement,) = fold.replacements
    assert (replacement.seq, replacement.start, replacement.end, replacement.shadowed_seqs) == (
        3,
        0,
        1,
        (0, 1),
    )


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        (
            [{**ev(0, "session/end-seed"), "surfaceOp": "append"}],
            'session event "session/end-seed" is not surface-eligible and cannot carry surfaceOp',
        ),
        (
            [{**ev(0, "step/end"), "sourceEventSeqs": []}],
            'session event "step/end" is not surface-eligible and cannot carry sourceEventSeqs',
        ),
        (
            [{key: value for key, value in user(0).items() if key != "surfaceOp"}],
            'session event "user/message" is surface-eligible and requires a surfaceOp marker',
        ),
        (
            [user(0, surfaceOp="prepend")],
            'session event "user/message" carries an invalid surfaceOp',
        ),
        (
            [user(0), user(1, surfaceOp={"op": "replace", "start": 0})],
            'session event "user/message" carries an invalid replace surfaceOp',
        ),
        (
            [user(0), user(1, surfaceOp={"op": "replace", "start": 5, "end": 0})],
            "surface replace: start seq 5 not found in surface",
        ),
        (
            [
                user(0),
                user(1),
                user(2, surfaceOp={"op": "replace", "start": 1, "end": 0}, sourceEventSeqs=[0, 1]),
            ],
            "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)",
        ),
        (
            [
                user(0),
                user(1),
                user(2, surfaceOp={"op": "replace", "start": 0, "end": 1}, sourceEventSeqs=[0]),
            ],
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1",
        ),
        ([user(0), user(1, sourceEventSeqs=[0, 0])], "sourceEventSeqs must not contain duplicates"),
        (
            [user(0), user(1, sourceEventSeqs=[1])],
            "sourceEventSeqs must reference earlier events: 1 >= current seq 1",
        ),
        (
            [user(0, sourceEventSeqs=[])],
            "sourceEventSeqs must not be empty except on assistant/message",
        ),
        (
            [user(0, sourceEventSeqs=3)],
            "sourceEventSeqs on event at seq 0 must be an array when present",
        ),
        (
            [user(0), user(1, sourceEventSeqs=[-1])],
            'session event "user/message" sourceEventSeqs must densely contain non-negative safe integers',
        ),
        (
            [
                tool_result(0, "c"),
                tool_result(
                    1,
                    "c",
                    "new",
                    surfaceOp={"op": "replace", "start": 0, "end": 0},
                    sourceEventSeqs=[0],
                )
                | {"time": 0},
            ],
            None,
        ),
        (
            [
                user(0),
                tool_result(1, "c"),
                tool_result(
                    2,
                    "c",
                    surfaceOp={"op": "replace", "start": 0, "end": 1},
                    sourceEventSeqs=[0, 1],
                ),
            ],
            "tool/result surface replacement must rewrite exactly one current node",
        ),
        (
            [
                user(0),
                tool_result(
                    1, "c", surfaceOp={"op": "replace", "start": 0, "end": 0}, sourceEventSeqs=[0]
                ),
            ],
            "tool/result surface replacement must target a current tool/result",
        ),
        ([ev(1, "step/end")], "session event seq 1 is not contiguous; expected 0"),
    ],
)
def test_surface_rule_failures(events: list[dict[str, Any]], detail: str | None) -> None:
    """Every surface rule failure reports upstream's detail; valid folds pass."""
    if detail is None:
        fold_surface(events)
        return
    with pytest.raises(SurfaceError) as caught:
        fold_surface(events)
    assert str(caught.value) == detail


def test_tool_result_rewrite_may_change_only_content() -> None:
    """A tool-result replacement that changes anything but the block content fails."""
    original = tool_result(0, "c")
    changed = tool_result(
        1, "c", "new", surfaceOp={"op": "replace", "start": 0, "end": 0}, sourceEventSeqs=[0]
    )
    assert fold_surface([original, changed]).nodes == (1,)
    changed["data"]["message"]["id"] = "other"
    with pytest.raises(SurfaceError, match=r"^tool/result surface replacement may change only"):
        fold_surface([original, changed])


def test_empty_provenance_is_allowed_on_assistant_messages() -> None:
    """An empty sourceEventSeqs is legal only on assistant/message."""
    assert fold_surface([assistant(0, sourceEventSeqs=[])]).nodes == (0,)
