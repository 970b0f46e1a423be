"""Writing session logs: batching, validation, repair on open, crash safety (spec §2.1, §9)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._errors import LogStorageError, LogWriteError
from actors.session_log._header import SessionHeader
from actors.session_log._layout import Compression
from actors.session_log._reader import load_session
from actors.session_log._repair import TOOL_OUTCOME_UNKNOWN
from actors.session_log._writer import SessionLogWriter
from actors.session_log._zstd import decode_frame, scan_frames

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "dsh-sessions"
HEADER = SessionHeader(id="w1", created_at=1767225600000, cwd="/projects/demo")
MODEL = {"kind": "model", "provider": "p", "model": "m"}
SUFFIX = {"zstd": "session.jsonl.zstd", "none": "session.jsonl"}


def user_message(message_id: str, text: str) -> dict[str, Any]:
    """A current-shape user message payload."""
    return {
        "id": message_id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def assistant_data(turn: int, message_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    """A current-shape assistant/message payload."""
    message = {"id": message_id, "role": "assistant", "content": list(blocks), "source": MODEL}
    return {"turn": turn, "step": 1, "message": message}


def tool_result_data(turn: int, call_id: str, text: str) -> dict[str, Any]:
    """A current-shape tool/result payload."""
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
    }
    message = {
        "id": f"r-{call_id}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [block],
    }
    return {"turn": turn, "step": 1, "message": message}


def crash_stream(
    turns: int | None = None, pad: int = 0
) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """Yield a deterministic stream of (type, data, options), 13 events per turn.

    Per turn: turn/start, step/start, user/message, five text deltas, an assistant
    message with one tool call, tool/call, tool/result, step/end, turn/end. Options
    carry `surface_op` / `source_event_seqs` relative to the turn's first seq via
    the key ``"rel"`` (the consumer adds the base seq). With `pad`, each tool result
    carries `pad` pseudo-random (incompressible, but reproducible) bytes as hex.
    """
    turn = 0
    while turns is None or turn < turns:
        turn += 1
        call = f"call-{turn}"
        yield "turn/start", {"turn": turn}, {}
        yield "step/start", {"turn": turn, "step": 1}, {}
        yield "user/message", user_message(f"u{turn}", f"question {turn}"), {"surface_op": "append"}
        for k in range(5):
            chunk = {"type": "text-delta", "index": 0, "text": f"t{turn}.{k}"}
            yield "assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk}, {}
        tool_call = {"type": "tool-call", "id": call, "name": "f", "arguments": "{}"}
        text = {"type": "text", "text": f"answer {turn}"}
        yield (
            "assistant/message",
            assistant_data(turn, f"a{turn}", text, tool_call),
            {"surface_op": "append", "rel": [3, 4, 5, 6, 7]},
        )
        yield (
            "tool/call",
            {"turn": turn, "step": 1, "callId": call, "name": "f", "arguments": "{}"},
            {},
        )
        padding = random.Random(turn).randbytes(pad).hex() if pad else ""
        result = tool_result_data(turn, call, "done" + padding)
        yield "tool/result", result, {"surface_op": "append", "rel": [9]}
        yield "step/end", {"turn": turn, "step": 1}, {}
        yield "turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}


def append_stream(writer: SessionLogWriter, item: tuple[str, Any, dict[str, Any]]) -> None:
    """Append one stream item; time is 1000 + seq so expected values are computable."""
    kind, data, options = item
    base = writer.next_seq - writer.next_seq % 13
    sources = [base + r for r in options["rel"]] if "rel" in options else None
    writer.append(
        kind,
        data,
        surface_op=options.get("surface_op"),
        source_event_seqs=sources,
        time_ms=1000 + writer.next_seq,
    )


def expected_events(count: int, pad: int = 0) -> list[dict[str, Any]]:
    """The first `count` events of the crash stream, as the reader returns them."""
    events: list[dict[str, Any]] = []
    for seq, (kind, data, options) in zip(range(count), crash_stream(pad=pad), strict=False):
        event: dict[str, Any] = {"type": kind, "seq": seq, "time": 1000 + seq, "data": data}
        base = seq - seq % 13
        if "rel" in options:
            event["sourceEventSeqs"] = [base + r for r in options["rel"]]
        if "surface_op" in options:
            event["surfaceOp"] = options["surface_op"]
        events.append(event)
    return events


def new_writer(
    tmp_path: Path, compression: Compression = "zstd", **options: Any
) -> SessionLogWriter:
    """Create a writer with a fixed clock under `tmp_path`."""
    return SessionLogWriter.create(
        tmp_path / SUFFIX[compression], HEADER, clock=lambda: 42, **options
    )


# --- create, batch, round trip ---


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_round_trip(tmp_path: Path, compression: Compression) -> None:
    """Events written in several batches read back identical, with header and surface."""
    writer = new_writer(tmp_path, compression)
    recorded = []
    for index, item in enumerate(crash_stream(3)):
        append_stream(writer, item)
        if index % 4 == 3:
            writer.flush()
    recorded.append(
        writer.append(
            "session/title", {"title": "T", "messageSeqs": [2], "source": {"kind": "fallback"}}
        )
    )
    recorded.append(writer.append("future/extension", {"x": 1}, ignorable=True))
    writer.close()
    loaded = load_session(writer.path)
    assert loaded.header == HEADER
    assert list(loaded.events) == [*expected_events(39), *recorded]
    assert loaded.surface == writer.surface
    assert loaded.captured_through_seq == 40
    assert recorded[0]["time"] == 42
    assert loaded.compression == compression


def test_nothing_is_written_before_the_first_flush(tmp_path: Path) -> None:
    """Creating a session and appending writes nothing until a flush materialises it."""
    writer = new_writer(tmp_path)
    writer.append("turn/start", {"turn": 1})
    assert not writer.path.exists()
    assert writer.flush() == 1
    assert writer.path.exists()
    assert list(tmp_path.iterdir()) == [writer.path]  # no temp file left behind
    assert writer.flush() == 0


def test_zstd_frames_are_header_then_one_per_batch(tmp_path: Path) -> None:
    """Frame 1 is exactly the header line; every flush adds one frame."""
    writer = new_writer(tmp_path)
    for batch in range(3):
        writer.append("turn/start", {"turn": batch + 1})
        writer.append("turn/end", {"turn": batch + 1, "reason": {"kind": "completed"}})
        writer.flush()
    writer.close()
    data = writer.path.read_bytes()
    frames = scan_frames(data).frames
    assert len(frames) == 4
    header = decode_frame(data[frames[0][0] : frames[0][1]])
    assert header == json.dumps(HEADER.to_record(), separators=(",", ":")).encode() + b"\n"
    second = decode_frame(data[frames[1][0] : frames[1][1]])
    assert second.count(b"\n") == 2


def test_chunk_runs_pack_per_batch(tmp_path: Path) -> None:
    """A run of deltas packs into one row; a run split by a flush packs per batch."""
    writer = new_writer(tmp_path, "none")
    deltas = [
        (
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": c}},
        )
        for c in "abcdef"
    ]
    for kind, data in deltas[:4]:
        writer.append(kind, data)
    writer.flush()
    for kind, data in deltas[4:]:
        writer.append(kind, data)
    writer.close()
    lines = writer.path.read_bytes().splitlines()
    assert len(lines) == 4
    assert json.loads(lines[1])["type"] == "text-chunks"
    assert json.loads(lines[1])["data"]["texts"] == ["a", "b", "c", "d"]
    assert [json.loads(raw)["type"] for raw in lines[2:]] == ["assistant/chunk"] * 2
    assert [e["data"]["chunk"]["text"] for e in load_session(writer.path).events] == list("abcdef")


def test_pack_chunks_can_be_switched_off(tmp_path: Path) -> None:
    """With pack_chunks=False every event is one line."""
    writer = new_writer(tmp_path, "none", pack_chunks=False)
    for item in crash_stream(1):
        append_stream(writer, item)
    writer.close()
    assert len(writer.path.read_bytes().splitlines()) == 14


def _legacy(name: str) -> bool:
    current_web = ("goal-multi-turn-actions", "message-feedback-protocol", "plan-narrow-viewport")
    web = name.startswith("apps__web__") and not any(part in name for part in current_web)
    return web or name.endswith("parent-override__child.replay.jsonl")


def test_reencoding_fixtures_is_byte_identical(tmp_path: Path) -> None:
    """Writing a fixture's events in one batch reproduces upstream's bytes exactly."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    checked = 0
    for source in sorted(FIXTURES.glob("*.jsonl")):
        if _legacy(source.name) or source.name.startswith("packages__test-support"):
            continue
        loaded = load_session(source)
        if not len(loaded.events):
            continue
        target = tmp_path / f"{checked}.jsonl"
        with SessionLogWriter.create(target, loaded.header, fsync=False) as writer:
            for event in loaded.events:
                writer.append(
                    event["type"],
                    event["data"],
                    surface_op=event.get("surfaceOp"),
                    source_event_seqs=event.get("sourceEventSeqs"),
                    ignorable=event.get("ignorable", False),
                    time_ms=event["time"],
                )
        assert target.read_bytes() == source.read_bytes(), source.name
        checked += 1
    assert checked > 100


# --- validation ---


@pytest.mark.parametrize(
    ("kind", "data", "options", "detail"),
    [
        ("future/thing", {}, {}, "unknown event type"),
        ("user/message", user_message("u", "x"), {}, "requires a surfaceOp marker"),
        (
            "turn/start",
            {"turn": 1},
            {"surface_op": "append"},
            "is not surface-eligible and cannot carry surfaceOp",
        ),
        (
            "user/message",
            user_message("u", "x"),
            {"surface_op": "append", "source_event_seqs": [1]},
            "must reference earlier events: 1 >= current seq 1",
        ),
        (
            "user/message",
            user_message("u", "x"),
            {"surface_op": {"op": "replace", "start": 7, "end": 7}, "source_event_seqs": [0]},
            "start seq 7 not found in surface",
        ),
        (
            "user/message",
            {"content": [], "source": {"kind": "user"}},
            {"surface_op": "append"},
            "legacy shape",
        ),
        (
            "request/header",
            {"header": {"config": {"model": "m"}}, "reason": "initial"},
            {},
            "lacks provider/model",
        ),
        ("turn/start", {"turn": 1, "trigger": {"kind": "message"}}, {}, "legacy shape"),
        (
            "turn/end",
            {"turn": 1, "reason": {"kind": "completed", "why": "x"}},
            {},
            "malformed pre-react-loop turn/end",
        ),
        ("step/end", {"x": float("nan")}, {}, "not losslessly JSON-serializable"),
        ("step/end", {"x": object()}, {}, "not losslessly JSON-serializable"),
    ],
)
def test_invalid_events_are_rejected_without_changing_state(
    tmp_path: Path, kind: str, data: Any, options: dict[str, Any], detail: str
) -> None:
    """An invalid event raises LogWriteError and leaves the writer untouched."""
    writer = new_writer(tmp_path)
    writer.append("session/end-seed", {})
    with pytest.raises(LogWriteError, match=detail):
        writer.append(kind, data, **options)
    assert (writer.next_seq, writer.pending_count) == (1, 1)
    writer.append("session/end-seed", {})
    writer.close()
    assert [e["seq"] for e in load_session(writer.path).events] == [0, 1]


def test_appended_data_is_snapshotted(tmp_path: Path) -> None:
    """Mutating a payload after append does not change what is written."""
    writer = new_writer(tmp_path)
    data = {"turn": 1}
    recorded = writer.append("turn/start", data)
    data["turn"] = 99
    writer.close()
    assert recorded["data"] == {"turn": 1}
    assert load_session(writer.path).events[0]["data"] == {"turn": 1}


def test_set_title(tmp_path: Path) -> None:
    """set_title records a normalised user rename that becomes the current title."""
    writer = new_writer(tmp_path)
    event = writer.set_title("  My\tnew \x1b[1mtitle\n")
    assert event["data"] == {"title": "My new title", "messageSeqs": [], "source": {"kind": "user"}}
    assert writer.title is not None
    assert writer.title.title == "My new title"
    with pytest.raises(LogWriteError, match="empty after normalization"):
        writer.set_title(" \x1b[0m ")
    writer.set_title(
        "Provider title", source={"kind": "provider", "provider": "p"}, message_seqs=[0]
    )
    writer.close()
    reopened = SessionLogWriter.open(writer.path)
    assert reopened.title is not None
    assert (reopened.title.title, reopened.title.event_seq) == ("Provider title", 1)
    reopened.close()


def test_subagent_descriptor_is_tracked(tmp_path: Path) -> None:
    """The first descriptor appended (or loaded) gives the creation label."""
    header = SessionHeader(
        id="child",
        created_at=1,
        cwd="/w",
        parent_session="p",
        origin="subagent",
        delegation_depth=1,
    )
    writer = SessionLogWriter.create(tmp_path / "session.jsonl.zstd", header)
    writer.append(
        "subagent/descriptor",
        {"version": 2, "mode": "one-shot", "provider": "spawn", "label": "Check X"},
    )
    writer.append(
        "subagent/descriptor",
        {"version": 2, "mode": "one-shot", "provider": "spawn", "label": "Later"},
    )
    assert writer.subagent_descriptor is not None
    assert writer.subagent_descriptor.label == "Check X"
    writer.close()
    reopened = SessionLogWriter.open(writer.path)
    assert reopened.subagent_descriptor is not None
    assert reopened.subagent_descriptor.label == "Check X"
    reopened.close()


def test_create_refuses_bad_input(tmp_path: Path) -> None:
    """Existing logs, unknown suffixes and invalid headers are refused."""
    existing = tmp_path / "session.jsonl"
    existing.write_bytes(b"")
    with pytest.raises(LogWriteError, match="already has a persisted log"):
        SessionLogWriter.create(existing, HEADER)
    with pytest.raises(LogWriteError, match="must end in"):
        SessionLogWriter.create(tmp_path / "log.txt", HEADER)
    with pytest.raises(LogWriteError, match="cwd must be an absolute path"):
        SessionLogWriter.create(
            tmp_path / "x.jsonl", SessionHeader(id="x", created_at=0, cwd="rel")
        )


def test_second_materialisation_of_one_path_fails(tmp_path: Path) -> None:
    """Two writers racing to create one log: the second publish is refused and its batch
    discarded."""
    first = new_writer(tmp_path)
    second = new_writer(tmp_path)
    first.append("turn/start", {"turn": 1})
    second.append("turn/start", {"turn": 2})
    first.flush()
    with pytest.raises(LogWriteError, match="a log already exists"):
        second.flush()
    assert (second.pending_count, second.next_seq) == (0, 0)
    assert load_session(first.path).events[0]["data"] == {"turn": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl.zstd"]


def test_closed_writer_refuses_appends(tmp_path: Path) -> None:
    """After close, append raises."""
    writer = new_writer(tmp_path)
    writer.close()
    writer.close()
    assert writer.closed
    with pytest.raises(LogWriteError, match="writer is closed"):
        writer.append("turn/start", {"turn": 1})


def test_fsync_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync=True syncs every batch; fsync=False never syncs."""
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    durable = SessionLogWriter.create(tmp_path / "a" / "session.jsonl.zstd", HEADER)
    durable.append("turn/start", {"turn": 1})
    durable.flush()
    first = len(calls)
    durable.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    durable.close()
    assert first >= 2  # temp file and directory
    assert len(calls) == first + 1
    calls.clear()
    fast = SessionLogWriter.create(tmp_path / "b" / "session.jsonl.zstd", HEADER, fsync=False)
    fast.append("turn/start", {"turn": 1})
    fast.close()
    assert calls == []


def test_failed_append_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half-way restores the file size and discards the batch: the next
    append reuses its seq and the failed event is never written."""
    writer = new_writer(tmp_path, "none")
    writer.append("turn/start", {"turn": 1})
    writer.flush()
    size = writer.path.stat().st_size
    writer.append("step/start", {"turn": 1, "step": 1})
    real_write = os.write

    def broken(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:5]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken)
    with pytest.raises(LogStorageError, match="No space left on device") as failed:
        writer.flush()
    assert (failed.value.reason, failed.value.errno_name) == ("no-space", "ENOSPC")
    assert writer.path.stat().st_size == size
    assert (writer.pending_count, writer.next_seq) == (0, 1)
    monkeypatch.setattr(os, "write", real_write)
    writer.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    writer.close()
    loaded = load_session(writer.path)
    assert [e["type"] for e in loaded.events][: loaded.stored_count] == ["turn/start", "turn/end"]


# --- open for append and repair ---


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_open_continues_the_log(tmp_path: Path, compression: Compression) -> None:
    """A reopened log appends at the next seq with its surface intact."""
    writer = new_writer(tmp_path, compression)
    stream = crash_stream(2)
    for _ in range(13):
        append_stream(writer, next(stream))
    writer.close()
    reopened = SessionLogWriter.open(writer.path)
    assert (reopened.next_seq, reopened.durable_count) == (13, 13)
    assert reopened.surface == writer.surface
    for item in stream:
        append_stream(reopened, item)
    reopened.close()
    assert list(load_session(writer.path).events) == expected_events(26)


def test_open_commits_closers_for_an_open_turn(tmp_path: Path) -> None:
    """Opening a log that ends inside a turn writes the synthetic closers."""
    writer = new_writer(tmp_path)
    stream = crash_stream()
    for _ in range(10):  # through tool/call, before its result
        append_stream(writer, next(stream))
    writer.close()
    inspected = load_session(writer.path)
    assert [e["type"] for e in inspected.closers] == ["tool/result", "step/end", "turn/end"]
    reopened = SessionLogWriter.open(writer.path)
    assert reopened.next_seq == 13
    reopened.close()
    repaired = load_session(writer.path)
    assert repaired.closers == ()
    assert repaired.stored_count == 13
    assert list(repaired.events) == list(inspected.events)


def test_open_repairs_a_torn_zstd_frame(tmp_path: Path) -> None:
    """A torn last frame is truncated; its recovered lines and closers are rewritten."""
    writer = new_writer(tmp_path)
    stream = crash_stream()
    for _ in range(6):
        append_stream(writer, next(stream))
    writer.flush()
    for _ in range(5):
        append_stream(writer, next(stream))
    writer.close()
    data = writer.path.read_bytes()
    writer.path.write_bytes(data[:-3])  # lose the last frame's checksum
    inspected = load_session(writer.path)
    assert inspected.torn is not None
    reopened = SessionLogWriter.open(writer.path)
    reopened.close()
    repaired = load_session(writer.path)
    assert repaired.torn is None
    assert repaired.closers == ()
    assert list(repaired.events) == list(inspected.events)


def test_open_truncates_a_torn_raw_line(tmp_path: Path) -> None:
    """A torn raw line is cut off before new events are appended."""
    writer = new_writer(tmp_path, "none")
    append_stream(writer, next(crash_stream()))
    writer.close()
    with writer.path.open("ab") as file:
        file.write(b'{"type":"step/st')
    reopened = SessionLogWriter.open(writer.path)
    reopened.close()
    repaired = load_session(writer.path)
    assert repaired.torn is None
    assert [e["type"] for e in repaired.events] == ["turn/start", "turn/end"]


def test_open_with_a_loaded_session_does_not_read_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the caller's loaded log, open commits its repair without reading the file."""
    writer = new_writer(tmp_path)
    stream = crash_stream()
    for _ in range(10):  # ends inside a turn: closers to commit
        append_stream(writer, next(stream))
    writer.close()
    loaded = load_session(writer.path)

    def no_reads(*args: object, **kwargs: object) -> None:
        raise AssertionError("the log was read again")

    monkeypatch.setattr("actors.session_log._writer.load_session", no_reads)
    reopened = SessionLogWriter.open(writer.path, loaded=loaded, clock=lambda: 42)
    assert (reopened.next_seq, reopened.surface) == (13, loaded.surface)
    reopened.set_title("after the repair")
    reopened.close()
    monkeypatch.undo()
    repaired = load_session(writer.path)
    assert (repaired.stored_count, repaired.closers) == (14, ())
    assert list(repaired.events)[:13] == list(loaded.events)


def test_append_checked_queues_without_revalidating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pre-checked events are queued as given (no second check), adopting the caller's fold;
    events that do not continue the log are refused and nothing is queued."""
    reference = new_writer(tmp_path / "a")
    recorded = [
        reference.append("turn/start", {"turn": 1}),
        reference.append("user/message", user_message("u1", "hi"), surface_op="append"),
        reference.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    reference.close()
    writer = new_writer(tmp_path / "b")
    folder = load_session(reference.path).fold()
    with pytest.raises(LogWriteError, match="do not continue the log at seq 0"):
        writer.append_checked(recorded[1:], folder)
    assert writer.pending_count == 0

    def no_checks(*args: object, **kwargs: object) -> None:
        raise AssertionError("validated twice")

    monkeypatch.setattr("actors.session_log._writer.check_new_event", no_checks)
    writer.append_checked(recorded, folder)
    assert (writer.next_seq, writer.surface, writer.pending_count) == (3, (1,), 3)
    writer.close()
    assert list(load_session(writer.path).events) == recorded


# --- a real process killed mid-stream ---

CHILD = """
import os, sys, time
root, tests, path, pad, every, fsync, slow = sys.argv[1:]
sys.path[:0] = [root, tests]
import actors.session_log._files
from actors.session_log._header import SessionHeader
from actors.session_log._writer import SessionLogWriter
from test_writer import append_stream, crash_stream
if slow == "1":
    # A slow disk: a big batch reaches the file in 64 KiB pieces, announced first, so
    # the parent can kill the process inside the write (a torn tail, as on a real crash).
    def write_slowly(fd, data):
        if len(data) > 1 << 18:
            print("WRITING", len(data), flush=True)
        for start in range(0, len(data), 65536):
            os.write(fd, data[start:start + 65536])
            time.sleep(0.005)
    actors.session_log._files._write_all = write_slowly
header = SessionHeader(id="crash", created_at=0, cwd="/w")
writer = SessionLogWriter.create(path, header, fsync=fsync == "1")
for index, item in enumerate(crash_stream(pad=int(pad))):
    append_stream(writer, item)
    if index % int(every) == int(every) - 1:
        writer.flush()
        print("ACK", writer.durable_count, flush=True)
"""


def expected_closers(stored: list[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """Independently derive the closers for a crash-stream prefix (13 events per turn)."""
    position = (len(stored) - 1) % 13
    if position == 12:
        return []
    closers: list[tuple[str, Any]] = []
    if position in (8, 9):  # the assistant's tool call has no result yet
        closers.append(
            ("tool/result", TOOL_OUTCOME_UNKNOWN if position == 9 else "TOOL_NOT_STARTED")
        )
    if 1 <= position <= 10:  # a step is open
        closers.append(("step/end", None))
    closers.append(("turn/end", {"kind": "interrupted"}))
    return closers


def _closer_detail(closer: Mapping[str, Any]) -> Any:
    if closer["type"] == "tool/result":
        return closer["data"]["error"]["code"]
    if closer["type"] == "turn/end":
        return closer["data"]["reason"]
    return None


def _expected_raw_tail(data: bytes) -> tuple[int, int]:
    """Count events in complete lines and where they end, independently of the reader."""
    end = data.rfind(b"\n") + 1
    count = 0
    for raw in data[:end].splitlines()[1:]:
        record = json.loads(raw)
        count += len(record["data"]["texts"]) if "seq0" in record else 1
    return count, end


def run_and_kill(
    path: Path, *, pad: int, every: int, fsync: bool, acks: int, delay: float, slow: bool
) -> int:
    """Run the writer child; SIGKILL it `delay` s after its `acks`-th acknowledgement.

    Returns:
        The last durable event count the child acknowledged.
    """
    arguments = [str(ROOT), str(Path(__file__).parent), str(path), str(pad), str(every)]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *arguments, "1" if fsync else "0", "1" if slow else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    acknowledged = 0
    seen = 0
    try:
        assert child.stdout is not None
        while True:
            line = child.stdout.readline()
            assert line, child.stderr.read().decode() if child.stderr else "child exited"
            if line.startswith(b"ACK"):
                acknowledged = int(line.split()[1])
                seen += 1
                if seen >= acks and not slow:
                    break
            elif seen >= acks:  # "WRITING": a big batch is on its way to the file
                break
        time.sleep(delay)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL
    return acknowledged


@pytest.mark.parametrize(
    ("compression", "pad", "every", "fsync", "delay"),
    [
        ("zstd", 0, 3, True, 0.0),
        ("none", 0, 3, True, 0.0),
        ("zstd", 1 << 19, 5, False, 0.005),
        ("none", 1 << 19, 5, False, 0.005),
    ],
    ids=["zstd-fsync", "raw-fsync", "zstd-big-batches", "raw-big-batches"],
)
def test_sigkill_mid_stream_keeps_acknowledged_events(
    tmp_path: Path, compression: Compression, pad: int, every: int, fsync: bool, delay: float
) -> None:
    """A writer process killed mid-stream loses no acknowledged event; load recovers per spec.

    Small fsync'd batches make the kill land between writes, mid-turn (closers); big
    batches written slowly make it land inside a write (a torn tail and closers).
    """
    path = tmp_path / SUFFIX[compression]
    acks = 4 if pad else 60
    acknowledged = run_and_kill(
        path, pad=pad, every=every, fsync=fsync, acks=acks, delay=delay, slow=bool(pad)
    )
    data = path.read_bytes()
    loaded = load_session(path)
    stored = list(loaded.events)[: loaded.stored_count]
    assert loaded.stored_count >= acknowledged
    assert stored == expected_events(loaded.stored_count, pad)
    if compression == "none":
        count, end = _expected_raw_tail(data)
        assert loaded.stored_count == count
        assert (loaded.torn is None) == (end == len(data))
        if loaded.torn is not None:
            assert loaded.torn.truncate_to == end
    elif loaded.torn is not None:
        assert loaded.torn.truncate_to == scan_frames(data).torn_start
    if pad:
        assert loaded.torn is not None  # killed inside the announced write
    closers = loaded.closers
    assert [(c["type"], _closer_detail(c)) for c in closers] == expected_closers(stored)
    for offset, closer in enumerate(closers):
        assert closer["seq"] == loaded.stored_count + offset
        assert closer["time"] == stored[-1]["time"]
    if closers and "sourceEventSeqs" in closers[0]:
        assert stored[closers[0]["sourceEventSeqs"][0]]["type"] == "tool/call"
    SessionLogWriter.open(path).close()
    resumed = load_session(path)
    assert (resumed.torn, resumed.closers) == (None, ())
    assert list(resumed.events) == list(loaded.events)


def test_whatever_the_writer_accepts_loads(tmp_path: Path) -> None:
    """Mutated events are either refused by the writer or load back exactly as recorded."""
    source = (
        FIXTURES / "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"
    )
    if not source.exists():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    events = list(load_session(source).events)
    values: list[Any] = [None, True, -1, 0, 1.5, "", "x", [], [0], {}, {"kind": "user"}, "append"]
    rng = random.Random(99)
    writer = SessionLogWriter.create(tmp_path / "session.jsonl.zstd", HEADER, fsync=False)
    recorded = []
    for attempt in range(400):
        event = json.loads(json.dumps(events[min(writer.next_seq, len(events) - 1)]))
        if attempt % 2:
            slots = [(event, key) for key in event] + [
                (event["data"], key) for key in event["data"]
            ]
            container, key = rng.choice(slots)
            container[key] = rng.choice(values)
        try:
            recorded.append(
                writer.append(
                    event["type"],
                    event["data"],
                    surface_op=event.get("surfaceOp"),
                    source_event_seqs=event.get("sourceEventSeqs"),
                    ignorable=event.get("ignorable") is True,
                    time_ms=event["time"],
                )
            )
        except LogWriteError:
            continue
        if attempt % 7 == 0:
            writer.flush()
    writer.close()
    loaded = load_session(writer.path)
    assert list(loaded.events)[: loaded.stored_count] == recorded
