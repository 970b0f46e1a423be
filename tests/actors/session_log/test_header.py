"""The session header: shape check, restore rules, version refusal (`session-log-format.md` §4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._errors import (
    LogCorruptError,
    LogUnsupportedError,
    LogValidationError,
    LogVersionError,
)
from actors.session_log._header import HeaderError, SessionHeader
from actors.session_log._reader import load_session, read_header

BASE: dict[str, Any] = {
    "type": "session",
    "version": 0,
    "id": "s1",
    "createdAt": 1767225600000,
    "delegationDepth": 0,
}


def _log(tmp_path: Path, header_text: str, *events: str) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(line + "\n" for line in (header_text, *events)), encoding="utf-8")
    return path


def test_full_header_round_trips_in_key_order() -> None:
    """Every field maps to snake_case and back to the on-disk camelCase order."""
    record = {
        "type": "session",
        "version": 0,
        "id": "child",
        "createdAt": 5,
        "cwd": "/w",
        "parentSession": "parent",
        "seedLength": 42,
        "origin": "subagent",
        "delegationDepth": 1,
        "agentPreset": "coder",
    }
    header = SessionHeader.from_record(record)
    assert header == SessionHeader(
        id="child",
        created_at=5,
        cwd="/w",
        parent_session="parent",
        seed_length=42,
        origin="subagent",
        delegation_depth=1,
        agent_preset="coder",
    )
    assert list(header.to_record().items()) == list(record.items())


def test_minimal_header_omits_absent_fields() -> None:
    """Absent optional fields are omitted (never null); delegationDepth is always written."""
    assert SessionHeader(id="x", created_at=0).to_record() == {
        "type": "session",
        "version": 0,
        "id": "x",
        "createdAt": 0,
        "delegationDepth": 0,
    }


def test_unknown_keys_are_dropped() -> None:
    """Unknown header keys are silently ignored."""
    header = SessionHeader.from_record({**BASE, "future": {"x": 1}, "title": "nope"})
    assert header.to_record() == BASE


def test_integral_floats_count_as_integers() -> None:
    """JSON may spell integers as 1.0 or 1e3; JS treats them as safe integers."""
    header = SessionHeader.from_record({**BASE, "createdAt": 1e3, "delegationDepth": 2.0})
    assert (header.created_at, header.delegation_depth) == (1000, 2)
    assert type(header.created_at) is int


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"type": "event"}, "type"),
        ({"version": "0"}, "version must be a number"),
        ({"id": 7}, "id must be a string"),
        ({"createdAt": -1}, "createdAt"),
        ({"createdAt": 1.5}, "createdAt"),
        ({"createdAt": 2**53}, "createdAt"),
        ({"createdAt": True}, "createdAt"),
        ({"delegationDepth": -1}, "delegationDepth"),
        ({"delegationDepth": None}, "delegationDepth"),
        ({"origin": "fork"}, "origin"),
        ({"origin": None}, "origin"),
        ({"agentPreset": 3}, "agentPreset"),
    ],
)
def test_shape_check_failures(change: dict[str, Any], detail: str) -> None:
    """The JSONL shape check rejects malformed required and typed fields."""
    with pytest.raises(HeaderError, match=detail) as caught:
        SessionHeader.from_record({**BASE, **change})
    assert caught.value.kind == "shape"


def test_missing_delegation_depth_is_a_shape_failure() -> None:
    """A header without delegationDepth is invisible to the JSONL backend (§4.2)."""
    record = {key: value for key, value in BASE.items() if key != "delegationDepth"}
    with pytest.raises(HeaderError, match="lacks delegationDepth"):
        SessionHeader.from_record(record)


@pytest.mark.parametrize("key", ["sandboxMode", "approvalPolicy"])
def test_retired_policy_keys_reject(key: str) -> None:
    """The retired policy baseline keys reject the header."""
    with pytest.raises(HeaderError, match="retired policy baseline fields") as caught:
        SessionHeader.from_record({**BASE, key: "x"})
    assert caught.value.kind == "retired"


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"parentSession": 1}, "parentSession must be a string"),
        ({"cwd": None}, "cwd must be a string"),
        ({"seedLength": -3}, "seedLength must be a non-negative safe integer"),
    ],
)
def test_restore_layer_type_failures(change: dict[str, Any], detail: str) -> None:
    """Fields the shape check ignores fail the restore layer."""
    with pytest.raises(HeaderError, match=detail) as caught:
        SessionHeader.from_record({**BASE, **change})
    assert caught.value.kind == "restore"


def test_relative_cwd_fails_restore_validation(tmp_path: Path) -> None:
    """A relative cwd passes the shape check but fails restore validation."""
    header = SessionHeader.from_record({**BASE, "cwd": "rel/dir"})
    with pytest.raises(HeaderError, match='cwd must be an absolute path, got "rel/dir"'):
        header.validate_for_restore()
    path = _log(tmp_path, json.dumps({**BASE, "cwd": "rel/dir"}))
    with pytest.raises(LogValidationError, match="failed validation: Error: session header cwd"):
        load_session(path)


@pytest.mark.parametrize("text", ['{"createdAt":-0', '{"delegationDepth":-0', '{"createdAt":-0.0'])
def test_negative_zero_is_rejected(tmp_path: Path, text: str) -> None:
    """-0 is rejected for createdAt and delegationDepth, as upstream does."""
    key = text.split('"')[1]
    others = ",".join(f'"{k}":{json.dumps(v)}' for k, v in BASE.items() if k != key)
    path = _log(tmp_path, text + "," + others + "}")
    with pytest.raises(LogCorruptError, match="first line is not a session header"):
        load_session(path)
    assert read_header(path) is None


def test_newer_version_is_refused_with_upstream_text(tmp_path: Path) -> None:
    """A v1 header is refused as "written by a newer harness", naming the raw log."""
    path = _log(tmp_path, json.dumps({**BASE, "version": 1}))
    with pytest.raises(LogVersionError) as caught:
        load_session(path)
    assert str(caught.value) == (
        'session "s1" uses log format v1, but this harness reads only v0: the log was written '
        f"by a newer harness — upgrade the harness to open it (raw log: {path})"
    )
    assert isinstance(caught.value, LogUnsupportedError)
    assert caught.value.query_code == "SESSION_QUERY_PERSISTENCE_FAILED"


def test_older_version_is_refused_with_upstream_text(tmp_path: Path) -> None:
    """A negative version is refused as having no upgrade path."""
    path = _log(tmp_path, json.dumps({**BASE, "version": -1}))
    with pytest.raises(LogVersionError) as caught:
        load_session(path)
    assert str(caught.value) == (
        'session "s1" uses log format v-1, older than the supported v0, and this build ships '
        f"no upgrade path for it (raw log: {path})"
    )


def test_version_refusal_precedes_shape_check(tmp_path: Path) -> None:
    """A future header shape still yields "upgrade the harness", never "corrupt"."""
    path = _log(tmp_path, json.dumps({"type": "session-v9", "version": 9, "id": "f"}))
    with pytest.raises(LogVersionError, match='session "f" uses log format v9'):
        load_session(path)


def test_listing_does_not_check_version(tmp_path: Path) -> None:
    """read_header returns a v1 header with today's shape; only a read refuses it."""
    path = _log(tmp_path, json.dumps({**BASE, "version": 1}))
    header = read_header(path)
    assert header is not None
    assert header.version == 1


def test_header_errors_on_read(tmp_path: Path) -> None:
    """A direct read reports unparsable, non-header and retired-key first lines."""
    with pytest.raises(
        LogCorruptError, match=r"^corrupt session log: header line is not valid JSON"
    ):
        load_session(_log(tmp_path, "{nope"))
    with pytest.raises(LogCorruptError, match="first line is not a session header"):
        load_session(_log(tmp_path, json.dumps({"type": "turn/start"})))
    with pytest.raises(LogCorruptError, match=r"^session header uses retired policy"):
        load_session(_log(tmp_path, json.dumps({**BASE, "sandboxMode": "x"})))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b'{"type":"session"')
    with pytest.raises(LogCorruptError, match=r"^empty or header-less session log"):
        load_session(empty)
    assert read_header(empty) is None
