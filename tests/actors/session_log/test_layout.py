"""Directory layout and path encodings of a DSH sessions root (`session-log-format.md` §2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.session_log._errors import LogLayoutError
from actors.session_log._layout import (
    MAX_SEGMENT_BYTES,
    compression_of,
    decode_segment,
    encode_segment,
    find_session_log,
    fits_one_segment,
    iter_session_logs,
    log_path,
    project_key,
)


def test_spec_example_path() -> None:
    """The verified example of §2.2 maps to the documented path."""
    path = log_path("/r", "/projects/my app", "sess/../x~1")
    assert path == Path("/r/--projects-my~0020app--/sess~002F..~002Fx~007E1/session.jsonl.zstd")


def test_raw_encoding_uses_plain_suffix() -> None:
    """With compression 'none' the transcript is session.jsonl."""
    assert log_path("/r", None, "a", "none") == Path("/r/_no-cwd/a/session.jsonl")


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        ("abc-DEF_1.2", "abc-DEF_1.2"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("~", "~007E"),
        ("a b", "a~0020b"),
        ("é", "~00E9"),
        ("😀", "~D83D~DE00"),
        ("\ud800x", "~D800x"),
        ('"\n', "~0022~000A"),
    ],
)
def test_encode_segment(raw: str, encoded: str) -> None:
    """Safe units stay literal; every other UTF-16 unit (and ~) becomes ~XXXX."""
    assert encode_segment(raw) == encoded


@given(st.text(min_size=1))
def test_decode_segment_inverts_encode_segment(raw: str) -> None:
    """Every non-empty id (lone surrogates, non-BMP characters, "~", "." and ".." included)
    comes back from its path segment unchanged."""
    assert decode_segment(encode_segment(raw)) == raw


def test_encode_segment_is_injective_on_tricky_ids() -> None:
    """Ids that differ only by escapes or dots never share a segment."""
    ids = [".", "..", "~002E", "~", "~007E", "a/b", "a~002Fb", "😀", "\ud83d\ude00"[:1]]
    assert len({encode_segment(i) for i in ids}) == len(ids)


def test_empty_id_and_cwd_cannot_be_encoded() -> None:
    """An empty session id or cwd is an error."""
    with pytest.raises(ValueError, match="empty path segment"):
        encode_segment("")
    with pytest.raises(ValueError, match="empty project path"):
        project_key("")


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/projects/demo", "--projects-demo--"),
        ("/a/b-c", "--a-b-c--"),
        ("/a-b/c", "--a-b-c--"),
        ("C:\\Users\\me", "--C-Users-me--"),
        ("//srv///x::y", "--srv-x-y--"),
        ("/", "--root--"),
        ("---", "--root--"),
        ("/~home", "--~007Ehome--"),
    ],
)
def test_project_key(cwd: str, key: str) -> None:
    """Separator runs collapse to one dash, leading dashes go, empty becomes root."""
    assert project_key(cwd) == key


def test_project_key_is_cut_to_251_characters() -> None:
    """A long cwd keeps only the first 251 key characters, even mid-escape."""
    key = project_key("/" + "a" * 249 + "é")
    assert key == "--" + "a" * 249 + "~0" + "--"
    assert len(key) == 255


def test_compression_of() -> None:
    """The file name declares the encoding."""
    assert compression_of("x/session.jsonl.zstd") == "zstd"
    assert compression_of("x/session.jsonl") == "none"
    assert compression_of("x/session.txt") is None


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_iter_and_find_session_logs(tmp_path: Path) -> None:
    """Discovery yields one transcript per session directory and finds one by id."""
    first = _touch(log_path(tmp_path, "/p", "one"))
    second = _touch(log_path(tmp_path, None, "two"))
    (tmp_path / "--p--" / "empty-dir").mkdir()
    _touch(tmp_path / "--p--" / "one" / "other-artifact.txt")
    assert sorted(iter_session_logs(tmp_path)) == sorted([first, second])
    assert find_session_log(tmp_path, "two") == second
    assert find_session_log(tmp_path, "three") is None
    assert list(iter_session_logs(tmp_path / "missing")) == []


def test_mixed_encodings_fail(tmp_path: Path) -> None:
    """A session directory holding the other encoding's transcript is an error."""
    _touch(log_path(tmp_path, "/p", "one", "none"))
    with pytest.raises(LogLayoutError, match=r"uses \.jsonl, but this backend is configured"):
        list(iter_session_logs(tmp_path, "zstd"))
    with pytest.raises(LogLayoutError, match="configured for compression 'zstd'"):
        find_session_log(tmp_path, "one", "zstd")


def test_flat_layout_file_fails(tmp_path: Path) -> None:
    """A transcript file directly inside a project directory is a hard error."""
    _touch(tmp_path / "--p--" / "old.jsonl.zstd")
    with pytest.raises(LogLayoutError, match="retired flat layout"):
        list(iter_session_logs(tmp_path))
    with pytest.raises(LogLayoutError, match="retired flat layout"):
        find_session_log(tmp_path, "x")


def test_duplicate_id_across_projects_fails(tmp_path: Path) -> None:
    """One id under two project directories is an error on lookup."""
    _touch(log_path(tmp_path, "/p", "dup"))
    _touch(log_path(tmp_path, "/q", "dup"))
    with pytest.raises(LogLayoutError, match=r'^duplicate JSONL session id "dup" appears'):
        find_session_log(tmp_path, "dup")


def test_an_id_too_long_for_a_file_name_has_no_log(tmp_path: Path) -> None:
    """An id whose segment is longer than a file name may be fits no directory, so it is
    found nowhere (the file system is not asked: it would fail with ENAMETOOLONG)."""
    (tmp_path / "--p--").mkdir()
    longest = "n" * MAX_SEGMENT_BYTES
    assert fits_one_segment(longest)
    assert not fits_one_segment(longest + "n")
    assert not fits_one_segment("~" * 52)  # each escapes to five characters: 260 bytes
    assert find_session_log(tmp_path, longest + "n") is None
    assert not fits_one_segment("")
    with pytest.raises(ValueError, match="empty"):
        find_session_log(tmp_path, "")
