"""Reading transcripts: lines, torn tails, zstd frames, listing (spec §3, §6, §9)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._errors import (
    LogCorruptError,
    LogLayoutError,
    LogNotFoundError,
    LogReadError,
    LogUnsupportedError,
    LogValidationError,
)
from actors.session_log._layout import log_path
from actors.session_log._reader import list_sessions, load_session, load_session_by_id, read_header
from actors.session_log._zstd import compress_frame, scan_frames

HEADER: dict[str, Any] = {
    "type": "session",
    "version": 0,
    "id": "s",
    "createdAt": 0,
    "cwd": "/w",
    "delegationDepth": 0,
}
FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "dsh-sessions"


def line(value: object) -> bytes:
    """Serialise one record as upstream does (compact JSON, no newline)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def ev(seq: int, kind: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    """Build an event envelope."""
    return {
        "type": kind,
        "seq": seq,
        "time": 1000 + seq,
        "data": {} if data is None else data,
        **extra,
    }


def turn(seq: int, number: int = 1) -> list[dict[str, Any]]:
    """A complete six-event turn starting at `seq`."""
    user = {"id": f"u{number}", "role": "user", "content": [{"type": "text", "text": "hi"}]}
    user["source"] = {"kind": "user"}
    assistant = {
        "id": f"a{number}",
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return [
        ev(seq, "turn/start", {"turn": number}),
        ev(seq + 1, "step/start", {"turn": number, "step": 1}),
        ev(seq + 2, "user/message", user, surfaceOp="append"),
        ev(
            seq + 3,
            "assistant/message",
            {"turn": number, "step": 1, "message": assistant},
            surfaceOp="append",
        ),
        ev(seq + 4, "step/end", {"turn": number, "step": 1}),
        ev(seq + 5, "turn/end", {"turn": number, "reason": {"kind": "completed"}}),
    ]


def write_raw(path: Path, *records: object, header: object = HEADER, tail: bytes = b"") -> Path:
    """Write a raw transcript: header line, one line per record, then `tail` verbatim."""
    body = b"".join((r if isinstance(r, bytes) else line(r)) + b"\n" for r in (header, *records))
    path.write_bytes(body + tail)
    return path


def test_reads_a_complete_log(tmp_path: Path) -> None:
    """A clean log loads all events, its surface and capturedThroughSeq."""
    loaded = load_session(write_raw(tmp_path / "session.jsonl", *turn(0)))
    assert [e["type"] for e in loaded.events][:2] == ["turn/start", "step/start"]
    assert loaded.captured_through_seq == 5
    assert loaded.surface == (2, 3)
    assert loaded.torn is None
    assert not loaded.needs_repair
    snapshot = loaded.surface_snapshot()
    assert snapshot.session == loaded.header
    assert [e["seq"] for e in snapshot.events] == [2, 3]


def test_header_only_log_has_no_captured_seq(tmp_path: Path) -> None:
    """A log with no events has capturedThroughSeq None and an empty surface."""
    loaded = load_session(write_raw(tmp_path / "session.jsonl"))
    assert (loaded.captured_through_seq, loaded.surface, len(loaded.events)) == (None, (), 0)


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    """A final fragment without a newline is ignored and marked for truncation."""
    events = turn(0)
    path = write_raw(tmp_path / "session.jsonl", *events[:5], tail=line(events[5])[:-3])
    loaded = load_session(path)
    assert loaded.stored_count == 5
    assert loaded.torn is not None
    committed = path.read_bytes().rfind(b"\n") + 1
    assert (loaded.torn.truncate_to, loaded.torn.durable_count) == (committed, 5)
    # The open turn gets a synthetic closing turn/end (the step was closed).
    assert [e["type"] for e in loaded.closers] == ["turn/end"]


@pytest.mark.parametrize(
    "bad",
    [
        b"{not json",
        b'{"type":"step/end","seq":4,"time":NaN,"data":{}}',
        b'{"type":"step/end","seq":4,"time":Infinity,"data":{}}',
        b'{"type":"text-chunks","seq0":4,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}',
        b"",
    ],
)
def test_bad_line_without_later_turn_end_drops_the_tail(tmp_path: Path, bad: bytes) -> None:
    """An unparsable line (or malformed row) stops the prefix; no later turn/end: tail dropped."""
    events = turn(0)
    later = line(ev(5, "session/end-seed"))
    path = write_raw(tmp_path / "session.jsonl", *events[:4], bad, later)
    loaded = load_session(path)
    assert loaded.stored_count == 4
    assert loaded.torn is not None
    assert loaded.torn.truncate_to == len(line(HEADER)) + 1 + sum(
        len(line(e)) + 1 for e in events[:4]
    )


@pytest.mark.parametrize(
    "bad",
    [
        b"{not json",
        b'{"type":"x","seq":4,"time":-Infinity,"data":{}}',
        b'{"type":"tool-call-chunks","seq0":4,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}',
    ],
)
def test_bad_line_before_a_turn_end_is_fatal(tmp_path: Path, bad: bytes) -> None:
    """A bad committed line followed by any parseable turn/end is corruption."""
    events = turn(0)
    path = write_raw(tmp_path / "session.jsonl", *events[:4], bad, events[4], events[5])
    with pytest.raises(LogCorruptError) as caught:
        load_session(path)
    assert caught.value.reason == "corrupt session log: unparsable committed event at line 5"
    assert caught.value.line == 5
    assert str(caught.value) == f"{caught.value.reason} (raw log: {path})"


def test_seq_gap_rules(tmp_path: Path) -> None:
    """A seq gap drops the tail, or is fatal with its upstream message before a turn/end."""
    events = turn(0)
    gap = {**events[4], "seq": 9}
    dropped = load_session(write_raw(tmp_path / "a.jsonl", *events[:4], gap))
    assert dropped.stored_count == 4
    with pytest.raises(LogCorruptError) as caught:
        load_session(write_raw(tmp_path / "b.jsonl", *events[:4], gap, events[5]))
    assert caught.value.reason == (
        "corrupt session log: seq gap in committed region at line 5 (expected 4, got 9)"
    )
    with pytest.raises(LogCorruptError, match=r"line 1 \(expected 0, got undefined\)"):
        load_session(write_raw(tmp_path / "c.jsonl", 5, events[5]))


def test_integral_float_seq_and_time_are_integers(tmp_path: Path) -> None:
    """Seqs and times spelled 1.0 or 1e3 read as integers, as in JavaScript."""
    path = write_raw(
        tmp_path / "session.jsonl", b'{"type":"session/end-seed","seq":0.0,"time":1e3,"data":{}}'
    )
    event = load_session(path).events[0]
    assert (event["seq"], event["time"]) == (0, 1000)
    assert type(event["seq"]) is int
    assert type(event["time"]) is int


def test_invalid_utf8_becomes_replacement_characters(tmp_path: Path) -> None:
    """Invalid UTF-8 decodes lossily to U+FFFD, never an error."""
    bad = b'{"type":"session/end-seed","seq":0,"time":0,"data":{"note":"a\xff\xfeb\xed\xa0\x80c"}}'
    loaded = load_session(write_raw(tmp_path / "session.jsonl", bad))
    assert loaded.events[0]["data"]["note"] == "a\ufffd\ufffdb\ufffd\ufffd\ufffdc"


def test_packed_unpacked_and_mixed_read_identically(tmp_path: Path) -> None:
    """A packed row expands to exactly the events it replaces."""
    chunks = [
        ev(
            i,
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": t}},
        )
        for i, t in enumerate(["a", "b", "c"])
    ]
    row = {
        "type": "text-chunks",
        "seq0": 0,
        "time0": 1000,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
    }
    packed = load_session(write_raw(tmp_path / "p.jsonl", row))
    plain = load_session(write_raw(tmp_path / "u.jsonl", *chunks))
    assert list(packed.events) == list(plain.events) == chunks
    assert packed.events[-1] == chunks[-1]
    assert packed.events[1:] == tuple(chunks[1:])
    assert packed.captured_through_seq == 2


def test_unknown_event_type_is_refused(tmp_path: Path) -> None:
    """An unknown type without ignorable refuses the log with upstream's wording."""
    path = write_raw(tmp_path / "session.jsonl", ev(0, "future/thing"))
    with pytest.raises(LogUnsupportedError) as caught:
        load_session(path)
    assert str(caught.value) == (
        'session "s" contains event type "future/thing" (seq 0) unknown to this harness and not '
        "marked ignorable; refusing to interpret the log — it was likely written by a newer "
        f"harness (raw log: {path})"
    )


def test_ignorable_unknown_event_is_kept(tmp_path: Path) -> None:
    """An ignorable unknown event stays in the list and counts for capturedThroughSeq."""
    loaded = load_session(
        write_raw(tmp_path / "s.jsonl", *turn(0), ev(6, "future/x", ignorable=True))
    )
    assert loaded.captured_through_seq == 6
    assert loaded.events[6]["type"] == "future/x"


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (
            ev(0, "request/header-delta"),
            "contains unsupported legacy request/header-delta event at seq 0",
        ),
        (ev(0, "mode/set"), "contains unsupported legacy mode/set event at seq 0"),
        (
            ev(
                0,
                "request/header",
                {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"},
            ),
            'contains unsupported legacy request/header reason "fallback" at seq 0',
        ),
    ],
)
def test_legacy_vocabulary_is_rejected(tmp_path: Path, event: dict[str, Any], detail: str) -> None:
    """Obsolete v0 vocabulary fails validation."""
    with pytest.raises(LogValidationError) as caught:
        load_session(write_raw(tmp_path / "session.jsonl", event))
    assert caught.value.detail == f'session "s" {detail}'


def test_text_turn_fixture_verified_examples(tmp_path: Path) -> None:
    """The spec's verified text-turn cases: closer at 39 without turn/end, 40 with a tail."""
    source = FIXTURES / "examples__acp-agent__tests__snapshots__text-turn__session.jsonl"
    if not source.exists():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    lines = source.read_bytes().splitlines()
    assert load_session(source).captured_through_seq == 39
    assert json.loads(lines[-1])["type"] == "turn/end"
    trimmed = tmp_path / "trimmed.jsonl"
    trimmed.write_bytes(b"\n".join(lines[:-1]) + b"\n")
    loaded = load_session(trimmed)
    assert loaded.captured_through_seq == 39
    closer = loaded.events[39]
    assert closer["type"] == "turn/end"
    assert closer["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert closer["time"] == loaded.events[38]["time"]
    extended = tmp_path / "extended.jsonl"
    tail = line(ev(40, "future/x", ignorable=True))
    extended.write_bytes(b"\n".join([*lines, tail]) + b"\n")
    assert load_session(extended).captured_through_seq == 40


def test_expected_id_must_match(tmp_path: Path) -> None:
    """Reading by id fails validation when the header carries another id."""
    path = write_raw(tmp_path / "session.jsonl", *turn(0))
    with pytest.raises(LogValidationError) as caught:
        load_session(path, expected_id="other")
    assert (
        caught.value.detail
        == 'stored session identity mismatch: requested "other", header contains "s"'
    )


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    """A missing transcript raises LogNotFoundError naming the path."""
    with pytest.raises(LogNotFoundError) as caught:
        load_session(tmp_path / "nope.jsonl")
    assert caught.value.path == tmp_path / "nope.jsonl"
    assert caught.value.query_code == "SESSION_QUERY_SESSION_NOT_FOUND"


def test_file_that_keeps_changing_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read whose stat identity changes on every attempt gives up with an error."""
    path = write_raw(tmp_path / "session.jsonl", *turn(0))
    real_stat = os.stat
    calls = iter(range(10**6))

    class Changing:
        def __init__(self, result: os.stat_result) -> None:
            self.st_dev, self.st_ino, self.st_size = result.st_dev, result.st_ino, result.st_size
            self.st_mtime_ns, self.st_ctime_ns = next(calls), result.st_ctime_ns

    monkeypatch.setattr(os, "stat", lambda p, *a, **k: Changing(real_stat(p, *a, **k)))
    with pytest.raises(LogReadError, match="kept changing"):
        load_session(path)


# --- zstd ---


def write_zstd(path: Path, *batches: list[object], header: object = HEADER) -> Path:
    """Write a zstd transcript: a header frame, then one frame per batch."""
    frames = [compress_frame(line(header) + b"\n")]
    for batch in batches:
        frames.append(compress_frame(b"".join(line(r) + b"\n" for r in batch)))
    path.write_bytes(b"".join(frames))
    return path


def test_multi_frame_zstd_reads_across_frames(tmp_path: Path) -> None:
    """Every frame is decoded, not just the first (the one-shot decoder trap)."""
    events = turn(0) + turn(6, 2)
    path = write_zstd(tmp_path / "session.jsonl.zstd", events[:2], events[2:7], events[7:])
    assert len(scan_frames(path.read_bytes()).frames) == 4
    loaded = load_session(path)
    assert list(loaded.events) == events
    assert loaded.compression == "zstd"
    assert read_header(path) == loaded.header


def test_zstd_torn_final_frame_keeps_complete_lines(tmp_path: Path) -> None:
    """EOF anywhere inside the last frame keeps earlier frames plus its decodable lines."""
    events = turn(0) + turn(6, 2)
    full = write_zstd(tmp_path / "full.jsonl.zstd", events[:6], events[6:]).read_bytes()
    last_start = scan_frames(full).frames[-1][0]
    for cut in range(last_start + 1, len(full)):
        path = tmp_path / "session.jsonl.zstd"
        path.write_bytes(full[:cut])
        loaded = load_session(path)
        assert 6 <= loaded.stored_count <= 12
        assert list(loaded.events)[: loaded.stored_count] == events[: loaded.stored_count]
        assert loaded.torn is not None
        assert (loaded.torn.truncate_to, loaded.torn.durable_count) == (last_start, 6)


def test_zstd_trailing_partial_magic_is_torn(tmp_path: Path) -> None:
    """Fewer than four trailing bytes are a torn frame, not corruption."""
    path = write_zstd(tmp_path / "session.jsonl.zstd", turn(0))
    size = path.stat().st_size
    with path.open("ab") as file:
        file.write(b"\x28\xb5")
    loaded = load_session(path)
    assert loaded.torn is not None
    assert loaded.torn.truncate_to == size


def test_zstd_damaged_complete_frame_is_corrupt(tmp_path: Path) -> None:
    """A checksum or decode failure in a complete frame is corruption."""
    events = turn(0)
    data = bytearray(write_zstd(tmp_path / "a.jsonl.zstd", events[:3], events[3:]).read_bytes())
    _, end = scan_frames(bytes(data)).frames[1]
    data[end - 1] ^= 0xFF  # the frame's checksum
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError, match="failed to decode"):
        load_session(path)


def test_zstd_line_defects_in_complete_frames_are_corrupt(tmp_path: Path) -> None:
    """Raw-mode leniency does not apply inside complete frames."""
    events = turn(0)
    no_newline = tmp_path / "a.jsonl.zstd"
    no_newline.write_bytes(
        compress_frame(line(HEADER) + b"\n")
        + compress_frame(line(events[0]) + b"\n" + line(events[1]))
    )
    message = r"^corrupt Zstandard session log: complete frame contains a torn JSONL record"
    with pytest.raises(LogCorruptError, match=message):
        load_session(no_newline)
    bad_json = tmp_path / "b.jsonl.zstd"
    bad_json.write_bytes(
        compress_frame(line(HEADER) + b"\n") + compress_frame(line(events[0]) + b"\n{oops\n")
    )
    with pytest.raises(LogCorruptError, match=message):
        load_session(bad_json)


def test_zstd_header_frame_rules(tmp_path: Path) -> None:
    """The first frame must be exactly one line; bad magic and empty files are corrupt."""
    two_lines = tmp_path / "a.jsonl.zstd"
    two_lines.write_bytes(
        compress_frame(line(HEADER) + b"\n" + line(ev(0, "session/end-seed")) + b"\n")
    )
    with pytest.raises(LogCorruptError, match="first frame is not exactly one header line"):
        load_session(two_lines)
    with pytest.raises(LogCorruptError, match="first frame is not exactly one header line"):
        read_header(two_lines)
    bad_magic = tmp_path / "b.jsonl.zstd"
    bad_magic.write_bytes(b"\x00\x01\x02\x03\x04\x05")
    with pytest.raises(LogCorruptError, match="invalid frame magic at byte 0"):
        load_session(bad_magic)
    empty = tmp_path / "c.jsonl.zstd"
    empty.write_bytes(b"")
    with pytest.raises(LogCorruptError, match="empty or header-less Zstandard session log"):
        load_session(empty)
    assert read_header(empty) is None


# --- listing and lookup by id ---


def _session(root: Path, session_id: str, cwd: str | None, created: int) -> Path:
    header = {**HEADER, "id": session_id, "createdAt": created}
    if cwd is None:
        del header["cwd"]
    else:
        header["cwd"] = cwd
    path = log_path(root, cwd, session_id)
    path.parent.mkdir(parents=True)
    return write_zstd(path, turn(0), header=header)


def test_list_and_load_by_id(tmp_path: Path) -> None:
    """Listing reads headers only and skips files without a valid header line."""
    one = _session(tmp_path, "one", "/p", 1)
    _session(tmp_path, "two/../x", None, 2)
    skipped = log_path(tmp_path, "/p", "junk")
    skipped.parent.mkdir(parents=True)
    skipped.write_bytes(compress_frame(b'{"type":"other"}\n'))
    listed = list_sessions(tmp_path)
    assert sorted(item.header.id for item in listed) == ["one", "two/../x"]
    assert load_session_by_id(tmp_path, "two/../x").header.created_at == 2
    assert load_session_by_id(tmp_path, "one").path == one
    with pytest.raises(LogNotFoundError, match=r'^session "three" not found$'):
        load_session_by_id(tmp_path, "three")


def test_listing_checks_path_identity(tmp_path: Path) -> None:
    """A transcript that does not sit where its header says fails the listing."""
    path = _session(tmp_path, "one", "/p", 1)
    moved = tmp_path / "--q--" / "one" / "session.jsonl.zstd"
    moved.parent.mkdir(parents=True)
    path.rename(moved)
    with pytest.raises(LogLayoutError, match="does not sit where its header says"):
        list_sessions(tmp_path)
    with pytest.raises(LogLayoutError, match="does not sit where its header says"):
        load_session_by_id(tmp_path, "one")


def test_listing_fails_on_a_header_that_cannot_name_a_path(tmp_path: Path) -> None:
    """An empty cwd in a header makes the whole listing fail."""
    path = tmp_path / "--p--" / "x" / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    write_zstd(path, [], header={**HEADER, "id": "x", "cwd": ""})
    with pytest.raises(LogLayoutError, match="cannot name a log path"):
        list_sessions(tmp_path)


# --- damaged input never escapes as an untyped error ---

_VALUES: list[Any] = [None, True, -1, 0, 1.5, 2**60, "", "x", [], [1, "a"], {}, {"kind": "user"}]


def _slots(value: Any, found: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((value, key))
            _slots(child, found)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((value, index))
            _slots(child, found)
    return found


def _mutate(record: Any, rng: random.Random) -> Any:
    slots = _slots(record, [])
    if not slots:
        return rng.choice(_VALUES)
    container, key = rng.choice(slots)
    if isinstance(container, dict) and rng.random() < 0.2:
        del container[key]
    else:
        container[key] = rng.choice(_VALUES)
    return record


def test_damaged_lines_fail_only_with_typed_errors(tmp_path: Path) -> None:
    """Randomly mutated real logs either load or raise LogReadError, never anything else."""
    names = [
        "examples__acp-agent__tests__snapshots__text-turn__session.jsonl",
        "apps__web__tests__snapshots__steering__session.jsonl",
        "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl",
        "examples__acp-agent__tests__snapshots__subagent-fork-in-process__session.1.jsonl",
    ]
    sources = [
        (FIXTURES / name).read_bytes().splitlines() for name in names if (FIXTURES / name).exists()
    ]
    if not sources:
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    rng = random.Random(20260601)
    outcomes = {"loaded": 0, "rejected": 0}
    for attempt in range(300):
        lines = list(rng.choice(sources))
        index = rng.randrange(len(lines))
        lines[index] = line(_mutate(json.loads(lines[index]), rng))
        path = tmp_path / f"{attempt}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        try:
            loaded = load_session(path)
        except LogReadError:
            outcomes["rejected"] += 1
        else:
            outcomes["loaded"] += 1
            assert [event["seq"] for event in loaded.events] == list(range(len(loaded.events)))
    assert outcomes["loaded"] > 0
    assert outcomes["rejected"] > 0


def test_damaged_zstd_bytes_fail_only_with_typed_errors(tmp_path: Path) -> None:
    """Flipped or cut bytes in a zstd log either load or raise LogReadError."""
    events = turn(0) + turn(6, 2)
    original = write_zstd(
        tmp_path / "a.jsonl.zstd", events[:4], events[4:9], events[9:]
    ).read_bytes()
    rng = random.Random(7)
    path = tmp_path / "session.jsonl.zstd"
    for _ in range(300):
        data = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data[: rng.randint(0, len(data))]))
        try:
            load_session(path)
        except LogReadError:
            pass


def test_open_turn_whose_last_event_lacks_time_is_a_validation_error(tmp_path: Path) -> None:
    """Crash closers reuse the last event's time; an event without one is still rejected by
    restore validation with a typed error naming the file (not a KeyError)."""
    path = write_raw(tmp_path / "session.jsonl", b'{"type":"turn/start","seq":0,"data":{"turn":1}}')
    with pytest.raises(LogValidationError) as caught:
        load_session(path)
    assert caught.value.path == path
    assert "time" in caught.value.detail


def test_loads_pause_garbage_collection_and_restore_it(tmp_path: Path) -> None:
    """The collector is paused while a transcript loads (also when loads overlap in threads
    or fail) and afterwards is exactly as enabled or disabled as before."""
    import gc
    import threading

    import actors.session_log._reader as reader

    path = write_raw(tmp_path / "session.jsonl", *turn(0))
    seen: list[bool] = []
    real = reader._restore

    def watching(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args)

    was = gc.isenabled()
    try:
        reader._restore = watching  # type: ignore[assignment]
        gc.enable()
        threads = [threading.Thread(target=load_session, args=(path,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert gc.isenabled()
        with pytest.raises(LogNotFoundError):
            load_session(tmp_path / "missing.jsonl")
        assert gc.isenabled()
        gc.disable()
        load_session(path)
        assert not gc.isenabled()
    finally:
        reader._restore = real  # type: ignore[assignment]
        if was:
            gc.enable()
    assert seen == [False] * 5
